#!/usr/bin/python3
"""neutron-server (as /usr/bin/neutron-server starts it), with the loopback
cloud's SQLite serialisation installed first (see sqlite_serial.py) and the
neutron-plugins folder on sys.path, whose dist-info registers the loopback
mechanism driver (neutron-plugins/manila_setup_loopback.py).

Usage: neutron-server.py --config-file neutron.conf
"""

import os
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                'neutron-plugins'))

# Importing neutron.cmd.eventlet monkey-patches the process for eventlet;
# sqlite_serial must see that (it tunes its waits to it).
from neutron.cmd.eventlet.server import main  # noqa: E402

import sqlite_serial  # noqa: E402  (this script's folder is sys.path[0])

if __name__ == '__main__':
    sqlite_serial.install()
    sys.exit(main())
