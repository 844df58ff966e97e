#!/usr/bin/python3
"""Runs Manila's API, scheduler and share services in ONE Python process.

Why one process: with transport_url = fake:// oslo.messaging carries RPC in
memory, so the API, the scheduler and the share manager only reach each other
when they share a process. That spares us a message broker. Debian's own
/usr/bin/manila-all cannot be used: it imports manila.cmd.all, which the
package does not ship.

It also works around a Manila bug that only bites on SQLite: some database
functions open a second session while the caller's session holds a write
transaction (share_instance_delete calls share_access_delete_all_by_share, so
EVERY share deletion does it). On MySQL the two touch different rows; on SQLite
the second connection waits for the file lock its own caller holds, freezing
the whole (single-threaded, eventlet) process until "database is locked", and
the share stays in "deleting". See join_nested_sessions() below.

And like Keystone and Neutron here, it serialises its SQLite transactions
(sqlite_serial.py, from this script's folder): parallel writers otherwise fail
with "database is locked".

Usage: manila-all.py --config-file manila.conf
"""

import eventlet

eventlet.monkey_patch()
# Same workaround as manila/cmd/*.py: let the original threading module see
# the green threads (https://bugs.launchpad.net/bugs/1863021).
import __original_module_threading as orig_threading  # noqa: E402
import threading  # noqa: E402

orig_threading.current_thread.__globals__['_active'] = threading._active

import sys  # noqa: E402
import weakref  # noqa: E402

from oslo_config import cfg  # noqa: E402
from oslo_log import log  # noqa: E402
from oslo_service import service as oslo_service  # noqa: E402

from manila.common import config  # noqa: E402,F401  registers global opts
from manila import service  # noqa: E402
from manila import utils  # noqa: E402
from manila import version  # noqa: E402
from manila.db.sqlalchemy import api as db_api  # noqa: E402
from sqlalchemy import orm  # noqa: E402

import sqlite_serial  # noqa: E402  (this script's folder is sys.path[0])

CONF = cfg.CONF


def join_nested_sessions():
    """Make a nested database call join its caller's transaction.

    Within one green thread, get_session() hands back the session that is
    already inside a transaction instead of opening a second connection, and
    Session.begin() on a session already in a transaction becomes a
    subtransaction (SQLAlchemy 1.4, autocommit sessions) that commits with the
    outer one. Upstream Manila later fixed this by moving to enginefacade's
    reader/writer contexts, which nest the same way.
    """
    local = threading.local()  # green-thread local: eventlet patched threading
    get_session = db_api.get_session

    def joined_get_session(**kwargs):
        sessions = getattr(local, 'sessions', None)
        if sessions is None:
            sessions = local.sessions = weakref.WeakSet()
        for session in list(sessions):
            if session.in_transaction():
                return session
        session = get_session(**kwargs)
        sessions.add(session)
        return session

    db_api.get_session = joined_get_session

    begin = orm.Session.begin

    def joined_begin(self, subtransactions=False, nested=False, _subtrans=False):
        if not nested and self.in_transaction():
            subtransactions = True
        return begin(self, subtransactions=subtransactions, nested=nested,
                     _subtrans=_subtrans)

    orm.Session.begin = joined_begin


def main():
    log.register_options(CONF)
    CONF(sys.argv[1:], project='manila', version=version.version_string())
    config.verify_share_protocols()
    log.setup(CONF, 'manila')
    utils.monkey_patch()
    join_nested_sessions()
    sqlite_serial.install()

    # ServiceLauncher runs every service in this process (a ProcessLauncher
    # would fork, and forked children no longer share the fake:// bus).
    launcher = oslo_service.ServiceLauncher(CONF, restart_method='mutate')
    launcher.launch_service(service.Service.create(
        binary='manila-scheduler', coordination=True))
    for backend in CONF.enabled_share_backends:
        launcher.launch_service(service.Service.create(
            host='%s@%s' % (CONF.host, backend), service_name=backend,
            binary='manila-share', coordination=True))
    launcher.launch_service(service.WSGIService('osapi_share'))
    launcher.wait()


if __name__ == '__main__':
    main()
