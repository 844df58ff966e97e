"""A Manila share driver whose shares are real NFS exports: the loopback cloud's back end.

Each share is a directory under manila_setup_nfs_root, exported by the nfs-ganesha server that
nfs-backend.sh runs in the cloud's network namespace, on the export addresses Manila reports
(manila_setup_nfs_export_ips). The export side is Manila's own ganesha library
(GaneshaNASHelper2, the code the CephFS-NFS driver of production clouds uses): one EXPORT block per
share with separate rw and ro client lists, written as a file per export with an index of
%includes, and changed live over ganesha's D-Bus export manager. So an access rule that Manila
grants, or denies, is what the NFS server itself enforces, for a real NFS client.

Shaped like the DummyDriver it replaces (DHSS False; the same export layout, so every test that
reads export locations sees what it saw before): the admin-only export first, then the preferred
one, then the second. Snapshots are copies of the share's directory at the time they are taken,
and a share created from one starts as a copy of it. Sizes are Manila's bookkeeping only: the
directories share one host file system, whose size the guests' df shows, and extend and shrink
change nothing on disk (said in docs/development.md).

Loaded by class path from manila-all.py's folder: share_driver = manila_setup_nfs.NFSDriver.
"""

import os
import shutil

from oslo_config import cfg
from oslo_log import log

from manila.common import constants
from manila import exception
from manila.share import driver
from manila.share.drivers import ganesha

LOG = log.getLogger(__name__)

nfs_opts = [
    cfg.StrOpt('manila_setup_nfs_root',
               help='Directory that holds the shares and the snapshots.'),
    cfg.ListOpt('manila_setup_nfs_export_ips', default=['10.0.0.10', '10.0.0.20'],
                help='Export addresses, the preferred one first.'),
    cfg.ListOpt('manila_setup_nfs_admin_export_ips', default=['11.0.0.11'],
                help='Export addresses only administrators see.'),
    cfg.StrOpt('manila_setup_nfs_share_mode', default='0755',
               help='Mode of a new share\'s root directory (CephFS\'s default).'),
]


def export_path(ip, pseudo):
    """An export location as NFS writes it: an IPv6 address in brackets, as CephFS-NFS does."""
    if ':' in ip:
        return '[%s]:%s' % (ip, pseudo)
    return '%s:%s' % (ip, pseudo)


def pseudo_path(share):
    """The export's path: the share's and its instance's IDs, as the DummyDriver writes them."""
    return '/share_%s_%s' % (share['share_id'].replace('-', '_'), share['id'].replace('-', '_'))


class ExportHelper(ganesha.GaneshaNASHelper2):
    """Manila's ganesha export management, on ganesha's VFS back end."""

    def __init__(self, execute, config, root, **kwargs):
        super().__init__(execute, config, tag='manila-setup', **kwargs)
        self.root = root

    def _get_export_path(self, share):
        return os.path.join(self.root, 'shares', share['name'])

    def _get_export_pseudo_path(self, share):
        return pseudo_path(share)

    def _fsal_hook(self, base_path, share, access):
        return {'Name': 'VFS'}


class NFSDriver(driver.ExecuteMixin, driver.GaneshaMixin, driver.ShareDriver):
    """Real NFS shares on one host directory, exported by nfs-ganesha."""

    def __init__(self, *args, **kwargs):
        super().__init__(False, *args, config_opts=[nfs_opts], **kwargs)
        self.backend_name = (self.configuration.safe_get('share_backend_name') or
                             'manila-setup-nfs')
        self.root = self.configuration.safe_get('manila_setup_nfs_root')
        self._helper = None

    # Set-up.

    def do_setup(self, context):
        if not self.root:
            raise exception.BadConfigurationException(
                reason='manila_setup_nfs_root is not set')
        for sub in ('shares', 'snapshots'):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        self._helper = ExportHelper(self._execute, self.configuration, self.root)
        self._helper.init_helper()

    def check_for_setup_error(self):
        pass

    def get_network_allocations_number(self):
        return 0

    def _update_share_stats(self, data=None):
        st = os.statvfs(self.root)
        gib = 1024 ** 3
        super()._update_share_stats({
            'share_backend_name': self.backend_name,
            'storage_protocol': 'NFS',
            'vendor_name': 'manila-setup',
            'driver_version': '1.0',
            'total_capacity_gb': st.f_blocks * st.f_frsize // gib,
            'free_capacity_gb': st.f_bavail * st.f_frsize // gib,
            'reserved_percentage': 0,
            'snapshot_support': True,
            'create_share_from_snapshot_support': True,
            'revert_to_snapshot_support': False,
            'mount_snapshot_support': False,
        })

    # Paths and export locations.

    def _share_dir(self, share):
        return os.path.join(self.root, 'shares', share['name'])

    def _snapshot_dir(self, snapshot):
        return os.path.join(self.root, 'snapshots', snapshot['name'])

    def _locations(self, share):
        pseudo = pseudo_path(share)
        conf = self.configuration
        locations = [{'path': export_path(ip, pseudo), 'is_admin_only': True,
                      'metadata': {'preferred': False}}
                     for ip in conf.manila_setup_nfs_admin_export_ips]
        for i, ip in enumerate(conf.manila_setup_nfs_export_ips):
            locations.append({'path': export_path(ip, pseudo), 'is_admin_only': False,
                              'metadata': {'preferred': i == 0}})
        return locations

    def _check_proto(self, share):
        if share['share_proto'] != 'NFS':
            raise exception.InvalidShare(
                reason='protocol %s: this back end exports NFS only' % share['share_proto'])

    # Shares.

    def create_share(self, context, share, share_server=None):
        self._check_proto(share)
        path = self._share_dir(share)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, int(self.configuration.manila_setup_nfs_share_mode, 8))
        return self._locations(share)

    def create_share_from_snapshot(self, context, share, snapshot,
                                   share_server=None, parent_share=None):
        self._check_proto(share)
        src = self._snapshot_dir(snapshot)
        if not os.path.isdir(src):
            raise exception.ShareSnapshotNotFound(snapshot_id=snapshot['id'])
        dst = self._share_dir(share)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
        return {'export_locations': self._locations(share),
                'status': constants.STATUS_AVAILABLE}

    def delete_share(self, context, share, share_server=None):
        # No rules left: the export goes (a no-op when it never had one).
        self._helper.update_access(context, share, [], [], [])
        shutil.rmtree(self._share_dir(share), ignore_errors=True)

    def ensure_shares(self, context, shares):
        updates = {}
        for share in shares:
            os.makedirs(self._share_dir(share), exist_ok=True)
            updates[share['id']] = {'export_locations': self._locations(share),
                                    'status': constants.STATUS_AVAILABLE,
                                    'reapply_access_rules': True}
        return updates

    def ensure_share(self, context, share, share_server=None):
        return self._locations(share)

    def extend_share(self, share, new_size, share_server=None):
        LOG.info('share %s: size %s GiB recorded; the directory has no quota',
                 share['id'], new_size)

    def shrink_share(self, share, new_size, share_server=None):
        LOG.info('share %s: size %s GiB recorded; the directory has no quota',
                 share['id'], new_size)

    def update_access(self, context, share, access_rules, add_rules,
                      delete_rules, share_server=None):
        return self._helper.update_access(context, share, access_rules, add_rules,
                                          delete_rules, share_server=share_server)

    # Snapshots.

    def create_snapshot(self, context, snapshot, share_server=None):
        src = os.path.join(self.root, 'shares', snapshot['share_name'])
        dst = self._snapshot_dir(snapshot)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
        return {'provider_location': dst}

    def delete_snapshot(self, context, snapshot, share_server=None):
        shutil.rmtree(self._snapshot_dir(snapshot), ignore_errors=True)
