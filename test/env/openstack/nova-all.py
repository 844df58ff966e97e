#!/usr/bin/python3
"""Runs Nova's API, conductor, scheduler and compute (fake virt driver) in ONE
Python process.

Why one process: as for Manila here, transport_url = fake:// carries RPC in
memory, so the services only reach each other when they share a process; no
message broker is needed. Each service is what its /usr/bin/nova-* command
(nova/cmd/*.py) would start, with two differences:

- compute keeps direct database access: nova-compute normally turns it off and
  sends every object call to the conductor over RPC; in one process that round
  trip buys nothing.
- a ServiceLauncher runs everything in this process (the API's own launcher
  would fork a worker, and a forked child no longer shares the fake:// bus).

Like the other services here it serialises its SQLite transactions
(sqlite_serial.py, from this script's folder).

A cloud of several availability zones needs a compute host in each: the
environment's NOVA_MORE_COMPUTE_HOSTS (space-separated host names) adds one
compute service per name beside the host of nova.conf. The fake driver names
its node after its host, so each is a compute node and a resource provider of
its own.

Usage: [NOVA_MORE_COMPUTE_HOSTS="h2 h3"] nova-all.py --config-file nova.conf
"""

import nova.monkey_patch  # noqa: F401  eventlet, before anything else

import logging as std_logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import os_vif  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from oslo_service import service as oslo_service  # noqa: E402

from nova.compute import rpcapi as compute_rpcapi  # noqa: E402
from nova.conductor import rpcapi as conductor_rpcapi  # noqa: E402
import nova.conf  # noqa: E402
from nova import config  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import rpcapi as scheduler_rpcapi  # noqa: E402
from nova import service  # noqa: E402

import sqlite_serial  # noqa: E402  (this script's folder is sys.path[0])

CONF = nova.conf.CONF


def main():
    config.parse_args(sys.argv)
    logging.setup(CONF, 'nova')
    # oslo.messaging warns each time Nova makes an RPC client itself (nova/rpc.py does, for
    # every cell it targets): with host discovery every 2 s that was a line a second.
    std_logging.getLogger('oslo_messaging.rpc.client').setLevel(std_logging.ERROR)
    objects.register_all()
    # Registers os-vif's objects and loads its plugins, as nova-compute does.
    os_vif.initialize()
    objects.Service.enable_min_version_cache()
    sqlite_serial.install()

    launcher = oslo_service.ServiceLauncher(CONF, restart_method='mutate')
    for binary, topic in (('nova-conductor', conductor_rpcapi.RPC_TOPIC),
                          ('nova-scheduler', scheduler_rpcapi.RPC_TOPIC),
                          ('nova-compute', compute_rpcapi.RPC_TOPIC)):
        launcher.launch_service(
            service.Service.create(binary=binary, topic=topic))
    for host in os.environ.get('NOVA_MORE_COMPUTE_HOSTS', '').split():
        launcher.launch_service(service.Service.create(
            host=host, binary='nova-compute', topic=compute_rpcapi.RPC_TOPIC))
    launcher.launch_service(service.WSGIService('osapi_compute'))
    launcher.wait()


if __name__ == '__main__':
    main()
