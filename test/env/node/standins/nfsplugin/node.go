package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// Volume context keys upstream reads (case-insensitively). The Manila CSI plugin forwards
// "server" and "share"; the rest come from csi-driver-nfs' own StorageClasses.
const (
	paramServer           = "server"
	paramShare            = "share"
	paramSubDir           = "subdir"
	paramMountOptions     = "mountoptions"
	paramMountPermissions = "mountpermissions"
	pvcNameKey            = "csi.storage.k8s.io/pvc/name"
	pvcNamespaceKey       = "csi.storage.k8s.io/pvc/namespace"
	pvNameKey             = "csi.storage.k8s.io/pv/name"
)

// How long a mount and an unmount may take before upstream gives up (mount) or forces (unmount).
const (
	mountTimeout   = 90 * time.Second
	unmountTimeout = 30 * time.Second
)

// nodeServer is upstream's node service: publish mounts the share on the target, without a
// staging step.
type nodeServer struct {
	csi.UnimplementedNodeServer
	d *driver
}

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.d.nodeID}, nil
}

// NodeGetCapabilities answers upstream's three capabilities; there is no STAGE_UNSTAGE_VOLUME,
// so the kubelet (and the Manila plugin in front) publish without staging.
func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_UNKNOWN,
	} {
		caps = append(caps, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// publishRequest is what NodePublishVolume takes from its request and volume context.
type publishRequest struct {
	source      string
	server      string // host name or address, without the brackets of an IPv6 address
	options     []string
	permissions uint64
}

// parsePublishRequest reads the volume context as upstream does: server and share make the
// source server:share, subdir (with ${pvc.metadata.name}, ${pvc.metadata.namespace} and
// ${pv.metadata.name} replaced) is appended, mountoptions and mountpermissions override.
func parsePublishRequest(req *csi.NodePublishVolumeRequest, defaultPermissions uint64) (*publishRequest, error) {
	p := &publishRequest{permissions: defaultPermissions}
	p.options = append(p.options, req.GetVolumeCapability().GetMount().GetMountFlags()...)
	if req.GetReadonly() {
		p.options = append(p.options, "ro")
	}
	var share, subDir string
	replacer := map[string]string{}
	for k, v := range req.GetVolumeContext() {
		switch strings.ToLower(k) {
		case paramServer:
			p.server = v
		case paramShare:
			share = v
		case paramSubDir:
			subDir = v
		case pvcNamespaceKey:
			replacer["${pvc.metadata.namespace}"] = v
		case pvcNameKey:
			replacer["${pvc.metadata.name}"] = v
		case pvNameKey:
			replacer["${pv.metadata.name}"] = v
		case paramMountOptions:
			if v != "" {
				p.options = append(p.options, v)
			}
		case paramMountPermissions:
			if v == "" {
				continue
			}
			perm, err := strconv.ParseUint(v, 8, 32)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "invalid mountPermissions %s", v)
			}
			p.permissions = perm
		}
	}
	if p.server == "" {
		return nil, status.Error(codes.InvalidArgument, paramServer+" is a required parameter")
	}
	if share == "" {
		return nil, status.Error(codes.InvalidArgument, paramShare+" is a required parameter")
	}
	host := p.server
	if ip := net.ParseIP(p.server); ip != nil && ip.To4() == nil {
		host = "[" + p.server + "]"
	}
	p.source = host + ":" + share
	if subDir != "" {
		for from, to := range replacer {
			subDir = strings.ReplaceAll(subDir, from, to)
		}
		p.source = strings.TrimRight(p.source, "/") + "/" + subDir
	}
	return p, nil
}

func (s *nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "Volume capability missing in request")
	}
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "Volume ID missing in request")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "Target path not provided")
	}
	unlock, err := s.d.locks.lock(req.GetVolumeId(), target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	p, err := parsePublishRequest(req, s.d.mountPermissions)
	if err != nil {
		return nil, err
	}
	mounted, err := prepareTarget(target, p.permissions)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted {
		return &csi.NodePublishVolumeResponse{}, nil // published already
	}
	klog.V(2).Infof("NodePublishVolume: volumeID(%v) source(%s) targetPath(%s) mountflags(%v)", req.GetVolumeId(), p.source, target, p.options)
	if err := mountNFS(ctx, p, target); err != nil {
		return nil, mountError(err)
	}
	if p.permissions > 0 {
		if err := chmodIfDifferent(target, os.FileMode(p.permissions)); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	klog.V(2).Infof("volume(%s) mount %s on %s succeeded", req.GetVolumeId(), p.source, target)
	return &csi.NodePublishVolumeResponse{}, nil
}

// prepareTarget creates the target folder when it is missing and tells whether something is
// mounted on it already.
func prepareTarget(target string, permissions uint64) (mounted bool, err error) {
	mounted, err = isLikelyMountPoint(target)
	if os.IsNotExist(err) {
		if err := os.MkdirAll(target, os.FileMode(permissions)); err != nil {
			return false, fmt.Errorf("creating target %s: %w", target, err)
		}
		return false, nil
	}
	return mounted, err
}

// mountError maps a failed mount to upstream's codes: permission errors are PermissionDenied,
// invalid arguments InvalidArgument, the rest Internal.
func mountError(err error) error {
	switch {
	case os.IsPermission(err):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, syscall.EINVAL):
		return status.Error(codes.InvalidArgument, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

func chmodIfDifferent(path string, mode os.FileMode) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() == mode {
		return nil
	}
	klog.V(2).Infof("chmod targetPath(%s, mode:0%o) with permissions(0%o)", path, fi.Mode(), mode)
	return os.Chmod(path, mode)
}

// NodeUnpublishVolume unmounts the target if something is mounted there and removes it; a
// target that is gone already is success.
func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "Volume ID missing in request")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "Target path missing in request")
	}
	unlock, err := s.d.locks.lock(req.GetVolumeId(), target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	klog.V(2).Infof("NodeUnpublishVolume: unmounting volume %s on %s", req.GetVolumeId(), target)
	if err := cleanupMountPoint(target); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to unmount target %q: %v", target, err)
	}
	klog.V(2).Infof("NodeUnpublishVolume: unmount volume %s on %s successfully", req.GetVolumeId(), target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the file system's bytes and inodes under the volume path, as
// upstream does (without its cache).
func (s *nodeServer) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "NodeGetVolumeStats volume ID was empty")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "NodeGetVolumeStats volume path was empty")
	}
	if _, err := os.Lstat(req.GetVolumePath()); err != nil {
		if os.IsNotExist(err) {
			return nil, status.Errorf(codes.NotFound, "path %s does not exist", req.GetVolumePath())
		}
		return nil, status.Errorf(codes.Internal, "failed to stat file %s: %v", req.GetVolumePath(), err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(req.GetVolumePath(), &st); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to get metrics: statfs %s: %v", req.GetVolumePath(), err)
	}
	bsize := st.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{
			Unit:      csi.VolumeUsage_BYTES,
			Available: int64(st.Bavail) * bsize,
			Total:     int64(st.Blocks) * bsize,
			Used:      int64(st.Blocks-st.Bfree) * bsize,
		},
		{
			Unit:      csi.VolumeUsage_INODES,
			Available: int64(st.Ffree),
			Total:     int64(st.Files),
			Used:      int64(st.Files - st.Ffree),
		},
	}}, nil
}
