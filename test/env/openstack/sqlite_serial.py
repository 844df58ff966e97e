"""Serialises the SQLite writes of an OpenStack service.

Imported by the loopback cloud's service wrappers (keystone-wsgi.py,
neutron-server.py, manila-all.py); install() must run before the service
creates its database engine and then applies to every SQLAlchemy engine of the
process.

Why: oslo.db starts every SQLite transaction with a plain (deferred) BEGIN.
Such a transaction reads from a snapshot and asks for the write lock only at
its first write. If another connection has committed in between, SQLite
cannot upgrade it and answers SQLITE_BUSY at once, without calling the busy
handler, whatever the busy timeout: "database is locked" a few milliseconds
into a request (Keystone deleting a project, Neutron creating a security
group, while others wrote). The services' configuration cannot change that:
oslo.db's pool options are ignored for SQLite files (SQLAlchemy 1.4 gives them
a NullPool, a new connection per checkout), and the busy timeout is not asked.

What install() does: at the first write statement (INSERT, UPDATE, DELETE) of
a transaction, it ends the deferred transaction, which has written nothing
yet, and starts it again with BEGIN IMMEDIATE, which takes the write lock up
front, waiting for it in a loop that sleeps between tries. From there the
transaction cannot fail to upgrade, and writers queue instead of failing. The
reads before that first write saw an older snapshot than the writes will:
that is what MySQL's InnoDB, which these services are written for, does too
(consistent reads, writes on the latest rows). Read-only transactions never
take the lock, as before.

Waiting in Python rather than in SQLite's busy handler matters under eventlet
(Neutron, Manila): every green thread of the process shares one OS thread, and
a busy handler sleeping in C would also stop the green thread that holds the
lock, a wait that can only time out. time.sleep is eventlet's there.

Left as without this module: a write after a savepoint (the transaction cannot
be restarted under it), and a write on a second connection by a thread whose
first connection already holds the write lock (it would wait for itself).
"""

import logging
import os
import random
import sqlite3
import threading
import time

from sqlalchemy import event
from sqlalchemy.engine import Engine

LOG = logging.getLogger('manila_setup.sqlite_serial')

# How long a write waits for the database's write lock before it fails.
LOCK_WAIT = float(os.environ.get('MANILA_SETUP_SQLITE_LOCK_WAIT', '60'))
# Waits longer than this are logged.
SLOW = 5.0

_WRITES = ('INSERT', 'UPDATE', 'DELETE', 'REPLAC')
_owner = [None]  # the thread (green thread) whose transaction holds the lock


def _reset_after_fork():
    # A forked worker (Neutron's) holds no lock, whatever its parent did.
    _owner[0] = None


os.register_at_fork(after_in_child=_reset_after_fork)


def _dbapi(conn):
    fairy = conn.connection
    return getattr(fairy, 'dbapi_connection', None) or fairy.connection


def _end(info):
    if info.pop('sqlite_serial_writer', None):
        _owner[0] = None
    info.pop('sqlite_serial_savepoint', None)


def _begin_immediate(dbapi_con):
    start = time.monotonic()
    deadline = start + LOCK_WAIT
    pause = 0.002
    while True:
        try:
            dbapi_con.execute('BEGIN IMMEDIATE')
            break
        except sqlite3.OperationalError as e:
            if 'locked' not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.05)
    waited = time.monotonic() - start
    if waited > SLOW:
        LOG.warning('sqlite_serial: waited %.1fs for the write lock', waited)


def install():
    """Registers the hooks on every engine of the process (idempotent)."""
    if getattr(install, 'done', False):
        return
    install.done = True
    try:
        from eventlet import patcher
        green = patcher.is_monkey_patched('thread')
    except ImportError:
        green = False
    # SQLite's own busy wait, for what does not go through the loop above (a
    # write outside a transaction, a reader's rare SQLITE_BUSY): short under
    # eventlet (see above), long in a threaded server, where it blocks only
    # the waiting thread.
    busy_ms = 50 if green else 30000

    @event.listens_for(Engine, 'connect')
    def _connect(dbapi_con, _record):
        if isinstance(dbapi_con, sqlite3.Connection):
            dbapi_con.execute('PRAGMA busy_timeout = %d' % busy_ms)

    @event.listens_for(Engine, 'before_cursor_execute')
    def _before(conn, _cursor, statement, _params, _context, _many):
        info = conn.info
        # oslo.db marks the transactions it began with its own BEGIN.
        if ('in_transaction' not in info or 'sqlite_serial_writer' in info or
                'sqlite_serial_savepoint' in info or
                statement.lstrip()[:6].upper() not in _WRITES):
            return
        dbapi_con = _dbapi(conn)
        if not isinstance(dbapi_con, sqlite3.Connection):
            return
        me = threading.get_ident()
        if _owner[0] == me:
            return
        dbapi_con.execute('ROLLBACK')  # nothing written yet: reads only
        _begin_immediate(dbapi_con)
        _owner[0] = me
        info['sqlite_serial_writer'] = True

    @event.listens_for(Engine, 'savepoint')
    def _savepoint(conn, _name):
        if 'sqlite_serial_writer' not in conn.info:
            conn.info['sqlite_serial_savepoint'] = True

    @event.listens_for(Engine, 'commit')
    @event.listens_for(Engine, 'rollback')
    def _commit_or_rollback(conn):
        _end(conn.info)

    # A connection given back (or dropped) without commit or rollback.
    @event.listens_for(Engine, 'checkin')
    def _checkin(_dbapi_con, record):
        if record is not None:
            _end(record.info)

    @event.listens_for(Engine, 'invalidate')
    def _invalidate(_dbapi_con, record, _exc):
        if record is not None:
            _end(record.info)
