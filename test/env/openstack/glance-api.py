#!/usr/bin/python3
"""glance-api (as /usr/bin/glance-api starts it), with the loopback cloud's
SQLite serialisation installed first: see sqlite_serial.py. With workers = 0
the API runs in this one process, under eventlet.

Usage: glance-api.py --config-file glance-api.conf
"""

import sys

# Importing glance.cmd.api monkey-patches the process for eventlet;
# sqlite_serial must see that (it tunes its waits to it).
from glance.cmd.api import main

import sqlite_serial  # noqa: E402  (this script's folder is sys.path[0])

if __name__ == '__main__':
    sqlite_serial.install()
    sys.exit(main())
