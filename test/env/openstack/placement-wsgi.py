"""Placement's WSGI application (what /usr/bin/placement-api serves), for
uwsgi, with the loopback cloud's SQLite serialisation installed first: see
sqlite_serial.py. uwsgi finds sqlite_serial through --pythonpath; Placement
reads placement.conf from OS_PLACEMENT_CONFIG_DIR.
"""

import sqlite_serial

sqlite_serial.install()

from placement.wsgi import init_application  # noqa: E402

application = init_application()
