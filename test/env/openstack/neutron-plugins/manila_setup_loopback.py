"""An ML2 mechanism driver and a trunk driver for the loopback cloud, where
Neutron runs without agents.

Binding: with no mechanism driver, ML2 leaves a port that Nova asks to bind
to its compute host at binding:vif_type binding_failed, and Nova fails the
server (PortBindingFailed). Real clouds bind through an agent (OVS, Linux
bridge) or an SDN controller; there is neither here, and nothing would be
plugged anyway (Nova runs the fake virt driver). This driver binds any port
with a host on the first segment it is offered, as vif_type ovs, and marks
the binding ACTIVE, as an OVS agent would once it had wired the port.

Trunks: Neutron's trunk service plugin refuses to load unless a trunk driver
for one of the mechanism drivers is loaded (neutron/services/trunk/plugin.py,
check_driver_compatibility). LoopbackTrunkDriver is that driver for ovs
ports with VLAN subports; it has no agent, accepts bound parent ports, and
reports a trunk ACTIVE once it exists, as the OVN driver does once it has
set the subports up.

Registered for Neutron through the entry points of the dist-info folder
beside this file; neutron-server.py puts this folder on sys.path.
"""

from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events
from neutron_lib.callbacks import registry
from neutron_lib.callbacks import resources
from neutron_lib import constants
from neutron_lib.plugins.ml2 import api
from neutron_lib.services.trunk import constants as trunk_consts
from oslo_log import log as logging

from neutron.services.trunk.drivers import base as trunk_base

LOG = logging.getLogger(__name__)

NAME = 'manila_setup_loopback'

# The trunk driver, made when ML2 loads the mechanism driver (before the
# service plugins), kept here for the life of the process.
TRUNK_DRIVER = None

VIF_DETAILS = {
    portbindings.CAP_PORT_FILTER: True,
    portbindings.OVS_HYBRID_PLUG: False,
}


class LoopbackMechanismDriver(api.MechanismDriver):
    """Binds every port that has a host, as ovs, ACTIVE."""

    def initialize(self):
        global TRUNK_DRIVER
        TRUNK_DRIVER = LoopbackTrunkDriver.create()

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(segment[api.ID], portbindings.VIF_TYPE_OVS,
                                VIF_DETAILS, status=constants.PORT_STATUS_ACTIVE)
            LOG.debug('bound port %s on host %s, segment %s',
                      context.current['id'], context.host, segment[api.ID])
            return


class LoopbackTrunkDriver(trunk_base.DriverBase):
    """Lets the trunk service plugin load next to LoopbackMechanismDriver."""

    @property
    def is_loaded(self):
        return True

    @classmethod
    def create(cls):
        return cls(NAME, (portbindings.VIF_TYPE_OVS,),
                   (trunk_consts.SEGMENTATION_TYPE_VLAN,),
                   agent_type=None, can_trunk_bound_port=True)

    @registry.receives(resources.TRUNK_PLUGIN, [events.AFTER_INIT])
    def register(self, resource, event, trigger, payload=None):
        super().register(resource, event, trigger, payload=payload)
        registry.subscribe(self._trunk_active, resources.TRUNK,
                           events.AFTER_CREATE)
        registry.subscribe(self._trunk_active, resources.SUBPORTS,
                           events.AFTER_CREATE)

    @staticmethod
    def _trunk_active(resource, event, trigger, payload=None):
        payload.states[0].update(status=trunk_consts.TRUNK_ACTIVE_STATUS)
