// Command nfsplugin stands in for the nfsplugin command of kubernetes-csi/csi-driver-nfs v4.11.0
// (see package standins): the NFS partner plugin that the Manila CSI plugin forwards node calls
// to. It serves the CSI Identity, Controller and Node services on --endpoint. NodePublishVolume
// mounts the share with mount(2) itself; volume and snapshot creation answer Unimplemented, since
// Manila creates the shares.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

// vendorVersion is what GetPluginInfo reports.
const vendorVersion = "v4.11.0-standin"

// options are the command line of upstream v4.11.0's nfsplugin (klog's flags come on top).
type options struct {
	endpoint                     string
	nodeID                       string
	mountPermissions             uint64
	driverName                   string
	workingMountDir              string
	defaultOnDeletePolicy        string
	volStatsCacheExpireInMinutes int
	removeArchivedVolumePath     bool
	useTarCommandInSnapshot      bool
}

// addFlags declares upstream's flags on fs, with upstream's defaults. The ones about creating,
// deleting and snapshotting volumes parse and do nothing: this stand-in creates no volumes.
func addFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.StringVar(&o.endpoint, "endpoint", "unix://tmp/csi.sock", "CSI endpoint")
	fs.StringVar(&o.nodeID, "nodeid", "", "node id")
	fs.Uint64Var(&o.mountPermissions, "mount-permissions", 0, "mounted folder permissions")
	fs.StringVar(&o.driverName, "drivername", "nfs.csi.k8s.io", "name of the driver")
	fs.StringVar(&o.workingMountDir, "working-mount-dir", "/tmp", "working directory for provisioner to mount nfs shares temporarily (unused)")
	fs.StringVar(&o.defaultOnDeletePolicy, "default-ondelete-policy", "", "default policy for deleting subdirectory when deleting a volume (unused)")
	fs.IntVar(&o.volStatsCacheExpireInMinutes, "vol-stats-cache-expire-in-minutes", 10, "The cache expire time in minutes for volume stats cache (unused: stats are not cached)")
	fs.BoolVar(&o.removeArchivedVolumePath, "remove-archived-volume-path", false, "remove archived volume path in DeleteVolume (unused)")
	fs.BoolVar(&o.useTarCommandInSnapshot, "use-tar-command-in-snapshot", false, "use tar command to pack and unpack snapshot data (unused)")
	return o
}

func main() {
	klog.InitFlags(nil)
	o := addFlags(flag.CommandLine)
	_ = flag.Set("logtostderr", "true")
	flag.Parse() // exits 2 on an unknown flag, as upstream's flag.Parse does
	if o.nodeID == "" {
		klog.Warning("nodeid is empty")
	}
	klog.V(2).Infof("Driver: %v version: %v", o.driverName, vendorVersion)
	lis, err := listen(o.endpoint)
	if err != nil {
		klog.Fatal(err)
	}
	srv := newServer(o)
	klog.Infof("Listening for connections on address: %#v", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		klog.Fatalf("Failed to serve grpc server: %v", err)
	}
}

// listen parses an endpoint as upstream does (unix://path or tcp://address; the path of
// unix://tmp/csi.sock is /tmp/csi.sock) and listens there, replacing a stale socket.
func listen(endpoint string) (net.Listener, error) {
	scheme, addr, ok := strings.Cut(endpoint, "://")
	scheme = strings.ToLower(scheme)
	if !ok || addr == "" || (scheme != "unix" && scheme != "tcp") {
		return nil, fmt.Errorf("invalid endpoint %q: want unix://<path> or tcp://<address>", endpoint)
	}
	if scheme == "unix" {
		addr = path.Clean("/" + addr)
		if err := os.Remove(addr); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("removing stale socket %s: %w", addr, err)
		}
	}
	lis, err := net.Listen(scheme, addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", endpoint, err)
	}
	return lis, nil
}

// newServer is a gRPC server with the three CSI services of a driver built from o.
func newServer(o *options) *grpc.Server {
	d := &driver{
		name:             o.driverName,
		nodeID:           o.nodeID,
		mountPermissions: o.mountPermissions,
		locks:            &volumeLocks{held: map[string]bool{}},
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logGRPC))
	csi.RegisterIdentityServer(srv, &identityServer{d: d})
	csi.RegisterControllerServer(srv, &controllerServer{})
	csi.RegisterNodeServer(srv, &nodeServer{d: d})
	return srv
}
