"""Keystone's public WSGI application (what /usr/bin/keystone-wsgi-public
serves under uwsgi), with the loopback cloud's SQLite serialisation installed
first: see sqlite_serial.py. uwsgi finds sqlite_serial through --pythonpath.
"""

import sqlite_serial

sqlite_serial.install()

from keystone.server.wsgi import initialize_public_application  # noqa: E402

application = initialize_public_application()
