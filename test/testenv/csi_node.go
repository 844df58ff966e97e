package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
)

// CSINode is the node side of the real Manila CSI driver, run as a local process the way the
// driver's node DaemonSet runs it: manila-csi-plugin serving the CSI node service, with its
// runtime configuration file, forwarding to an NFS partner plugin. The partner here is a
// recording stand-in (a sim node mounts nothing): it keeps the NodeStageVolume calls forwarded
// to it, whose volume context says which export location the Manila plugin chose.
type CSINode struct {
	Dir    string
	Socket string

	partner *recordingPartner
	grpcSrv *grpc.Server
	plugin  *process
}

// CSINodeOptions shape a CSINode.
type CSINodeOptions struct {
	// Dir holds the sockets, the runtime configuration and the log (required; short: unix
	// socket paths are limited to 107 bytes).
	Dir string
	// RuntimeConfig is the content of the --runtime-config-file, as the driver's ConfigMap holds it.
	RuntimeConfig string
}

// StartCSINode starts the partner stand-in, then manila-csi-plugin (node service only), and waits
// until the plugin answers on its socket.
func StartCSINode(ctx context.Context, opts CSINodeOptions) (_ *CSINode, err error) {
	bin, err := CSIBinaries()
	if err != nil {
		return nil, err
	}
	n := &CSINode{Dir: opts.Dir, Socket: filepath.Join(opts.Dir, "manila.sock"), partner: &recordingPartner{}}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	config := filepath.Join(opts.Dir, "runtimeconfig.json")
	if err := os.WriteFile(config, []byte(opts.RuntimeConfig), 0o644); err != nil {
		return nil, err
	}
	partnerSocket := filepath.Join(opts.Dir, "nfs.sock")
	l, err := net.Listen("unix", partnerSocket)
	if err != nil {
		return nil, err
	}
	n.grpcSrv = grpc.NewServer()
	csi.RegisterIdentityServer(n.grpcSrv, n.partner)
	csi.RegisterNodeServer(n.grpcSrv, n.partner)
	go func() { _ = n.grpcSrv.Serve(l) }()

	n.plugin, err = startProcess(opts.Dir, "manila-csi-plugin", filepath.Join(bin, "manila-csi-plugin"),
		"--v=4",
		"--nodeid=sim-node-0",
		"--endpoint=unix://"+n.Socket,
		"--drivername="+DriverName,
		"--share-protocol-selector=NFS",
		"--fwdendpoint=unix://"+partnerSocket,
		"--provide-controller-service=false",
		"--provide-node-service=true",
		"--runtime-config-file="+config,
	)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if n.plugin.exited() {
			return nil, fmt.Errorf("manila-csi-plugin (node) exited:\n%s", n.plugin.tail(20))
		}
		if c, err := net.Dial("unix", n.Socket); err == nil {
			c.Close()
			return n, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("manila-csi-plugin (node) did not listen on %s\n%s", n.Socket, n.plugin.tail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stage sends the kubelet's NodeStageVolume for a volume the driver provisioned, with the node
// stage secret's data, and returns the volume context the plugin forwarded to the NFS partner
// (its "server" and "share" are the export location it chose).
func (n *CSINode) Stage(ctx context.Context, pv *corev1.PersistentVolume, secrets map[string]string) (map[string]string, error) {
	conn, err := grpc.NewClient("unix://"+n.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	staging := filepath.Join(n.Dir, "staging", pv.Name)
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, err
	}
	before := n.partner.count()
	_, err = csi.NewNodeClient(conn).NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId:          pv.Spec.CSI.VolumeHandle,
		StagingTargetPath: staging,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		},
		Secrets:       secrets,
		VolumeContext: pv.Spec.CSI.VolumeAttributes,
	})
	if err != nil {
		return nil, err
	}
	staged := n.partner.since(before)
	if len(staged) != 1 {
		return nil, fmt.Errorf("the plugin forwarded %d NodeStageVolume calls, want 1", len(staged))
	}
	return staged[0].GetVolumeContext(), nil
}

// Tail is the end of the plugin's log, for error messages.
func (n *CSINode) Tail(lines int) string { return n.plugin.tail(lines) }

// Stop stops the plugin and the partner.
func (n *CSINode) Stop() {
	if n.plugin != nil {
		n.plugin.stop()
	}
	if n.grpcSrv != nil {
		n.grpcSrv.Stop()
	}
}

// recordingPartner answers the NFS node plugin's identity calls and records what it is asked to
// stage. Unlike csi-driver-nfs v4.11.0 (and its stand-in, test/env/node/standins/nfsplugin),
// which publishes without staging, it offers STAGE_UNSTAGE_VOLUME: the Manila plugin then hands
// it the volume context in one NodeStageVolume call, which is what these tests read. The real
// node's test (test/e2e) runs the path without staging.
type recordingPartner struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer

	mu     sync.Mutex
	staged []*csi.NodeStageVolumeRequest
}

func (p *recordingPartner) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "nfs.csi.k8s.io", VendorVersion: "recording-partner"}, nil
}

func (p *recordingPartner) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (p *recordingPartner) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (p *recordingPartner) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

func (p *recordingPartner) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.staged = append(p.staged, req)
	return &csi.NodeStageVolumeResponse{}, nil
}

func (p *recordingPartner) NodeUnstageVolume(context.Context, *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (p *recordingPartner) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.staged)
}

func (p *recordingPartner) since(n int) []*csi.NodeStageVolumeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*csi.NodeStageVolumeRequest(nil), p.staged[n:]...)
}
