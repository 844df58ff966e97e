package machinectl

import (
	"context"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// ClusterOptions shape an installer-shaped cluster (see InstallerShaped). Zero values take the
// defaults.
type ClusterOptions struct {
	// InfraID is the infrastructure name (status.infrastructureName); default "ostest-8x2kq".
	InfraID string
	// Workers is the replica count of the worker MachineSet; default 3.
	Workers int32
	// InstallConfig is stored in kube-system/cluster-config-v1 as the installer does; default a
	// minimal OpenStack install-config with machine network 10.196.0.0/16.
	InstallConfig []byte
	// Controller tunes the Machine API stand-in.
	Controller Options
}

// DefaultInstallConfig is the install-config kept in kube-system/cluster-config-v1 when
// ClusterOptions.InstallConfig is empty.
const DefaultInstallConfig = `apiVersion: v1
baseDomain: example.com
metadata:
  name: ostest
networking:
  networkType: OVNKubernetes
  machineNetwork:
  - cidr: 10.196.0.0/16
compute:
- name: worker
  replicas: 3
  platform:
    openstack:
      type: m1.xlarge
controlPlane:
  name: master
  replicas: 3
platform:
  openstack:
    cloud: openstack
    apiVIPs:
    - 10.196.0.5
    ingressVIPs:
    - 10.196.0.7
`

// Cluster is a sim cluster made to look like a fresh OpenShift-on-OpenStack install, with the
// Machine API stand-in running.
type Cluster struct {
	*Controller
	// MachineSet is the name of the worker MachineSet.
	MachineSet string

	cancel context.CancelFunc
	done   chan struct{}
}

// InstallerShaped makes a sim cluster look like a fresh OpenShift-on-OpenStack install, as the
// e2e suite and the demo sandbox need it: Infrastructure "cluster" (platform OpenStack, highly
// available), kube-system/cluster-config-v1 with the install-config, namespace
// openshift-machine-api with one worker MachineSet as openshift-install writes it (primary
// network found by the cluster's tag, no storage network), and the Machine API stand-in running
// until Stop, however long it runs. It returns once the workers are Ready Nodes. It needs no *testing.T.
func InstallerShaped(ctx context.Context, c *testenv.SimCluster, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.InfraID == "" {
		opts.InfraID = "ostest-8x2kq"
	}
	if opts.Workers == 0 {
		opts.Workers = 3
	}
	if len(opts.InstallConfig) == 0 {
		opts.InstallConfig = []byte(DefaultInstallConfig)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 200, 400
	// The real finalizer name is not domain-qualified; the apiserver's warning about it is noise.
	cfg.WarningHandler = rest.NoWarnings{}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := machineclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cc, err := configclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:       configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.OpenStackPlatformType}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating Infrastructure cluster: %w", err)
	}
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName:     opts.InfraID,
		ControlPlaneTopology:   configv1.HighlyAvailableTopologyMode,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		PlatformStatus:         &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType},
	}
	if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("Infrastructure cluster status: %w", err)
	}
	for _, ns := range []string{"kube-system", Namespace} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-config-v1", Namespace: "kube-system"},
		Data:       map[string]string{"install-config": string(opts.InstallConfig)},
	}
	if _, err := kc.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating kube-system/cluster-config-v1: %w", err)
	}
	ms := WorkerMachineSet(opts.InfraID, 0, opts.Workers)
	if _, err := mc.MachineV1beta1().MachineSets(Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating MachineSet %s: %w", ms.Name, err)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	cl := &Cluster{Controller: New(mc, kc, c, opts.Controller), MachineSet: ms.Name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(cl.done)
		cl.Run(runCtx)
	}()
	defer func() {
		if err != nil {
			cl.Stop()
		}
	}()
	var last *machinev1beta1.MachineSet
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last, err = mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, ms.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return last.Status.ReadyReplicas == opts.Workers, nil
	})
	if err != nil {
		ready := int32(-1)
		if last != nil {
			ready = last.Status.ReadyReplicas
		}
		return nil, fmt.Errorf("worker MachineSet %s: %d of %d Machines Ready: %w (last reconcile error: %v)", ms.Name, ready, opts.Workers, err, cl.Err())
	}
	return cl, nil
}

// Stop stops the Machine API stand-in and waits until it has; with Options.Ports it deletes the
// ports of the servers of every Machine still there, so the cloud keeps nothing of the cluster.
func (c *Cluster) Stop() {
	c.cancel()
	<-c.done
	c.deleteAllPorts()
}
