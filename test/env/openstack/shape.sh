# The loopback cloud's shape: which storage network Manila exports on, where, and what the
# machine network looks like. Sourced by up.sh (which records the shape in $state/shape) and by
# nfs-backend.sh (which reads it back, so that `nfs-backend.sh env` from a test sees the shape
# the cloud was made with). MANILA_SETUP_CLOUD_SHAPE chooses it at up.sh time:
#
#   default   what every test and make demo use: the shared provider network "storage",
#             10.0.0.0/24, exported on 10.0.0.10 (preferred) and 10.0.0.20, with 11.0.0.11 an
#             admin-only export; an IPv4 machine network 10.196.0.0/16.
#   director  a cloud laid out as the director (TripleO) deploys Manila with CephFS through
#             NFS-Ganesha: the shared provider network "StorageNFS" with an IPv4 subnet
#             172.17.5.0/24 (Neutron's pool 172.17.5.150-250, the Ganesha address below it) and
#             an IPv6 subnet fd00:fd00:fd00:7000::/64 (DHCPv6-stateful), exported on 172.17.5.10
#             (preferred, listed first: the only order the driver v1.35.0 can stage, see
#             docs/operator.md) and [fd00:fd00:fd00:7000::10], with no admin-only export; a
#             dual-stack machine
#             network 10.196.0.0/16 + fd2e:6f44:5dd8:c956::/64, as the installer's dual-stack
#             documentation has it.
#   zones     a cloud of two availability zones, as edge and multi-site clouds are: Manila has a
#             back end in each zone (az1, az2), each exporting on a storage network of its site
#             (storage-az1 172.18.1.0/24 on 172.18.1.10, storage-az2 172.18.2.0/24 on
#             172.18.2.10), both of the share back end name "general" that the share type
#             default asks for; and a second back end in az1 ("fast", the type fast) exporting
#             on a third network, storage-az1-fast 172.18.3.0/24 on 172.18.3.10. No admin-only
#             export; an IPv4 machine network. Nova has the same two zones: a compute host in
#             each (host aggregates az1 and az2), so machines of either zone boot.
#
# cloud_shape SHAPE sets:
#   storage_network        the storage network's name
#   storage_subnets        one "NAME CIDR POOL_START POOL_END [IPV6_MODE]" per subnet, the first
#                          one written to seed.json as storage-subnet
#   export_addrs           the export addresses with their prefix length, the preferred first
#   admin_export_addrs     the admin-only ones
#   tenant_v6              the machine network's IPv6 subnet ("" for none)
#   backend_zone           the availability zone of Manila's back end nfs ("": Manila's default,
#                          nova)
#   backend_name           its share_backend_name (what a share type's share_backend_name
#                          extra spec picks)
#   more_backends          one "BACKEND ZONE BACKEND_NAME NETWORK SUBNET CIDR POOL_START POOL_END
#                          EXPORT_ADDR" per further back end, each exporting on a storage network
#                          of its own (a shared provider network, as the first)
#   nova_zones             Nova's availability zones, a compute host (and host aggregate) each:
#                          the first zone's host is Nova's own, the others' are named after
#                          their zone; none: one host in Nova's default zone, nova
cloud_shape() {
  backend_zone=
  backend_name=nfs
  more_backends=()
  nova_zones=()
  case $1 in
    default)
      storage_network=storage
      storage_subnets=("storage-subnet 10.0.0.0/24 10.0.0.100 10.0.0.250")
      export_addrs=(10.0.0.10/24 10.0.0.20/24)
      admin_export_addrs=(11.0.0.11/24)
      tenant_v6=
      ;;
    director)
      storage_network=StorageNFS
      storage_subnets=("StorageNFS-subnet 172.17.5.0/24 172.17.5.150 172.17.5.250"
        "StorageNFS-subnet-v6 fd00:fd00:fd00:7000::/64 fd00:fd00:fd00:7000::1000 fd00:fd00:fd00:7000::1fff dhcpv6-stateful")
      export_addrs=(172.17.5.10/24 fd00:fd00:fd00:7000::10/64)
      admin_export_addrs=()
      tenant_v6=fd2e:6f44:5dd8:c956::/64
      ;;
    zones)
      storage_network=storage-az1
      storage_subnets=("storage-az1-subnet 172.18.1.0/24 172.18.1.100 172.18.1.250")
      export_addrs=(172.18.1.10/24)
      admin_export_addrs=()
      tenant_v6=
      backend_zone=az1
      backend_name=general
      more_backends=("nfs-az2 az2 general storage-az2 storage-az2-subnet 172.18.2.0/24 172.18.2.100 172.18.2.250 172.18.2.10/24"
        "nfs-az1-fast az1 fast storage-az1-fast storage-az1-fast-subnet 172.18.3.0/24 172.18.3.100 172.18.3.250 172.18.3.10/24")
      nova_zones=(az1 az2)
      ;;
    *)
      echo "MANILA_SETUP_CLOUD_SHAPE=$1: want default, director or zones" >&2
      return 1
      ;;
  esac
}

# bare ADDR/PREFIX... prints the addresses without their prefix length, comma-separated.
bare() {
  local a out=()
  for a in "$@"; do out+=("${a%/*}"); done
  local IFS=,
  printf '%s' "${out[*]}"
}
