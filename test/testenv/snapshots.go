package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// SnapshotAssets returns the folder holding snapshot-controller and crds/: $MANILA_SETUP_SNAPSHOTS
// if set (make test sets it), else what test/env/snapshots/build.sh prints (it builds once, then
// answers from its cache in a second).
func SnapshotAssets(ctx context.Context) (string, error) {
	return BuiltFolder(ctx, "MANILA_SETUP_SNAPSHOTS", "test/env/snapshots/build.sh", "snapshot-controller")
}

// ServeSnapshots gives the cluster what OpenShift's csi-snapshot-controller-operator gives every
// cluster: the snapshot.storage.k8s.io CRDs (VolumeSnapshot, VolumeSnapshotContent,
// VolumeSnapshotClass) and the external-snapshotter's snapshot-controller, which binds
// VolumeSnapshots to contents that the driver's csi-snapshotter sidecar then takes. Call it
// before the operator starts, as on a cluster where the CRDs are there from installation: the
// operator applies its VolumeSnapshotClass only when the CRD is served.
func (c *SimCluster) ServeSnapshots(ctx context.Context) error {
	dir, err := c.InstallSnapshotCRDs(ctx)
	if err != nil {
		return err
	}
	kubeconfig, err := c.KubeconfigFor(c.dir, "snapshot-controller", "system:masters")
	if err != nil {
		return err
	}
	// Retries start at 1 s and double up to 30 s (the default maximum is 5 minutes): a test
	// waits for what a refused snapshot turns into, not for the controller's back-off.
	proc, err := startProcess(c.dir, "snapshot-controller", filepath.Join(dir, "snapshot-controller"),
		"--kubeconfig="+kubeconfig, "--leader-election=false", "--retry-interval-max=30s", "--v=2")
	if err != nil {
		return err
	}
	c.processes = append(c.processes, proc)
	return nil
}

// InstallSnapshotCRDs installs the snapshot.storage.k8s.io CRDs (no controller) and returns the
// folder test/env/snapshots/build.sh filled.
func (s *APIServer) InstallSnapshotCRDs(ctx context.Context) (string, error) {
	dir, err := SnapshotAssets(ctx)
	if err != nil {
		return "", err
	}
	crds, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil || len(crds) != 3 {
		return "", fmt.Errorf("%s/crds holds %d CRDs, want the 3 of snapshot.storage.k8s.io: run test/env/snapshots/build.sh again", dir, len(crds))
	}
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true, MaxTime: crdWait}); err != nil {
		return "", fmt.Errorf("snapshot CRDs: %w", err)
	}
	return dir, nil
}

// NewSnapshots is ServeSnapshots for one test: it fails the test when the snapshot controller
// cannot start.
func (c *SimCluster) NewSnapshots(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), crdWait+time.Minute)
	defer cancel()
	if err := c.ServeSnapshots(ctx); err != nil {
		t.Fatal(err)
	}
}
