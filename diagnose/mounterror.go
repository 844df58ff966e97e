package diagnose

import "strings"

// What an NFS client's words mean, read from the real thing: each reading below is what Linux's
// NFS client (mount.nfs, the kernel) says when a Manila share's export refuses it or cannot be
// reached, as test/datapath sees it against an nfs-ganesha export with the addresses and rules
// of a cloud. Several say something other than what happened: an NFSv4 server hides an export
// from a client it does not admit, so the client reports a missing path.
var mountReadings = []struct{ words, meaning string }{
	{"reason given by server: No such file or directory",
		"an NFSv4 server hides an export from a client its access rules do not admit: the node's mount address is not in the share's rules; the path itself is right"},
	{"access denied by server",
		"the NFS server refused the node: its mount address is not in the share's access rules"},
	{"Connection timed out",
		"the node's NFS traffic never reaches the export: no port on the network Manila exports on, or a route or security group that drops it"},
	{"mount failed: time out",
		"the NFS node plugin gave up waiting for the mount, which hangs while the node's NFS traffic does not reach the export: no port on the network Manila exports on, or a route or security group that drops it"},
	{"No route to host",
		"the node has no route to the export address: no port on the network Manila exports on"},
	{"Stale file handle",
		"the export the pod mounted is gone: the share's last access rule was revoked (an nfs-ganesha back end drops an export that admits no one), or the share was deleted or moved; a rule granted again makes a new export, and the old mount stays stale until the pod starts again"},
	{"Read-only file system",
		"the share's access rule for the node is read-only"},
	{"Permission denied",
		"the NFS server refused an operation: the node's access rule was revoked, or the share's files do not let the pod's user write"},
	{"no such device",
		"the node's kernel has no NFS client"},
	// The Manila node plugin's own words, before any mount: cloud-provider-openstack v1.35.0
	// cannot read a bracketed IPv6 export location while it matches the share's exports to
	// its runtime configuration (shareadapters/nfs.go, nfsMatchExportLocationAddress).
	{"in export location path",
		"the Manila CSI driver cannot read the share's IPv6 export location ([address]:/path) while it looks for the export in the storage subnet: it stages a share only when an IPv4 export in that subnet is preferred and listed before every IPv6 one; have the back end list and prefer its IPv4 export address first, or export on IPv4 only"},
}

// ExplainMountError says what the NFS client's message means for a Manila volume, or "" when it
// does not know the message.
func ExplainMountError(msg string) string {
	for _, r := range mountReadings {
		if strings.Contains(msg, r.words) {
			return r.meaning
		}
	}
	return ""
}
