package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2"
)

// driver is what the services share.
type driver struct {
	name             string
	nodeID           string
	mountPermissions uint64
	locks            *volumeLocks
}

// identityServer answers as upstream's: its name and version, always ready, and a controller
// service.
type identityServer struct {
	csi.UnimplementedIdentityServer
	d *driver
}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	if s.d.name == "" {
		return nil, status.Error(codes.Unavailable, "Driver name not configured")
	}
	return &csi.GetPluginInfoResponse{Name: s.d.name, VendorVersion: vendorVersion}, nil
}

func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE,
		}},
	}}}, nil
}

// notCreating is the answer of every call that would create, delete, expand or snapshot a
// volume on an NFS server.
var notCreating = status.Error(codes.Unimplemented,
	"this stand-in for csi-driver-nfs creates, deletes, expands and snapshots no volumes: Manila creates the shares")

// controllerServer announces upstream's capabilities; of the calls behind them it implements
// ValidateVolumeCapabilities only.
type controllerServer struct {
	csi.UnimplementedControllerServer
}

func (*controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (*controllerServer) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return nil, notCreating
}

func (*controllerServer) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return nil, notCreating
}

func (*controllerServer) ControllerExpandVolume(context.Context, *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return nil, notCreating
}

func (*controllerServer) CreateSnapshot(context.Context, *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	return nil, notCreating
}

func (*controllerServer) DeleteSnapshot(context.Context, *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return nil, notCreating
}

// ValidateVolumeCapabilities confirms every capability but block access, as upstream does.
func (*controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "Volume ID missing in request")
	}
	if err := validVolumeCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(),
	}}, nil
}

func validVolumeCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return errors.New("volume capabilities missing in request")
	}
	for _, c := range caps {
		if c.GetBlock() != nil {
			return errors.New("block volume capability not supported")
		}
	}
	return nil
}

// volumeLocks keeps two calls from working on the same volume and target at once; the second
// gets Aborted, as upstream answers.
type volumeLocks struct {
	mu   sync.Mutex
	held map[string]bool
}

func (l *volumeLocks) tryAcquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key] {
		return false
	}
	l.held[key] = true
	return true
}

func (l *volumeLocks) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, key)
}

// lock takes the lock of a volume and target, or returns upstream's Aborted error.
func (l *volumeLocks) lock(volumeID, target string) (func(), error) {
	key := fmt.Sprintf("%s-%s", volumeID, target)
	if !l.tryAcquire(key) {
		return nil, status.Errorf(codes.Aborted, "An operation with the given Volume ID %s already exists", volumeID)
	}
	return func() { l.release(key) }, nil
}

// quietMethods are logged at a verbosity the manifests' --v=2 leaves out, as upstream does: the
// kubelet and the probes call them all the time.
var quietMethods = map[string]bool{
	"/csi.v1.Identity/Probe":           true,
	"/csi.v1.Node/NodeGetCapabilities": true,
	"/csi.v1.Node/NodeGetVolumeStats":  true,
}

// logGRPC logs each call, its request and its answer; errors always.
func logGRPC(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	level := klog.Level(2)
	if quietMethods[info.FullMethod] {
		level = 8
	}
	klog.V(level).Infof("GRPC call: %s", info.FullMethod)
	klog.V(level).Infof("GRPC request: %v", withoutSecrets(req))
	resp, err := handler(ctx, req)
	if err != nil {
		klog.Errorf("GRPC error: %v", err)
	} else {
		klog.V(level).Infof("GRPC response: %v", withoutSecrets(resp))
	}
	return resp, err
}

// withoutSecrets is a copy of a CSI message with its secrets field (CSI puts them at the top
// level) cleared, fit for the log.
func withoutSecrets(m any) any {
	pm, ok := m.(proto.Message)
	if !ok {
		return m
	}
	c := proto.Clone(pm)
	r := c.ProtoReflect()
	if fd := r.Descriptor().Fields().ByName("secrets"); fd != nil && r.Has(fd) {
		r.Clear(fd)
	}
	return c
}
