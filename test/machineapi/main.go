// Command machine-api-openstack runs the OpenShift Machine API's controllers against a
// kubeconfig, in one manager: the MachineSet controller, the machine controller with an
// OpenStack actuator (package provider) and the drain controller beside it, as the machine
// controller's AddWithActuator wires them, nodelink, which links Nodes to Machines, and the
// masters' ControlPlaneMachineSet with etcd's hooks (package controlplane, played). The
// controllers are the real ones (github.com/openshift/machine-api-operator pkg/controller); the
// actuator reproduces the OpenShift OpenStack provider, which the Go module proxy does not
// serve. The tests start it as a process beside a test cluster and a loopback OpenStack.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	configv1 "github.com/openshift/api/config/v1"
	openshiftfeatures "github.com/openshift/api/features"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	configclient "github.com/openshift/client-go/config/clientset/versioned/typed/config/v1"
	"github.com/openshift/machine-api-operator/pkg/controller/machine"
	"github.com/openshift/machine-api-operator/pkg/controller/machineset"
	"github.com/openshift/machine-api-operator/pkg/controller/nodelink"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/manila-setup/manila-setup/test/machineapi/controlplane"
	"github.com/manila-setup/manila-setup/test/machineapi/provider"
)

func main() {
	// A flag set of our own: controller-runtime registers a global --kubeconfig of its own.
	flags := flag.NewFlagSet("machine-api-openstack", flag.ExitOnError)
	klog.InitFlags(flags)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	namespace := flags.String("namespace", "openshift-machine-api", "namespace of the MachineSets and Machines")
	metrics := flags.Bool("metrics", false, "serve metrics and health probes on 127.0.0.1, ports chosen by the system")
	_ = flags.Parse(os.Args[1:])
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "machine-api-openstack: --kubeconfig is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace, *metrics); err != nil {
		fmt.Fprintln(os.Stderr, "machine-api-openstack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace string, metrics bool) error {
	log := klog.NewKlogr()
	ctrl.SetLogger(log)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}

	// The controllers ask one feature gate, MachineAPIMigration (a Machine's authoritative API,
	// Machine API or Cluster API); it is off here as on a cluster without the migration.
	gate := featuregate.NewFeatureGate()
	if err := gate.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		featuregate.Feature(openshiftfeatures.FeatureGateMachineAPIMigration): {Default: false, PreRelease: featuregate.Alpha},
	}); err != nil {
		return err
	}

	scheme := clientgoscheme.Scheme
	for _, add := range []func() error{
		func() error { return machinev1beta1.Install(scheme) },
		func() error { return machinev1.Install(scheme) },
		func() error { return configv1.Install(scheme) },
	} {
		if err := add(); err != nil {
			return err
		}
	}
	opts := manager.Options{
		Scheme: scheme,
		// The Machine API objects are watched in their namespace only, as the operator runs
		// them; Nodes, being cluster-scoped, are watched whole.
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if metrics {
		opts.Metrics.BindAddress = "127.0.0.1:0"
		opts.HealthProbeBindAddress = "127.0.0.1:0"
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	if metrics {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return err
		}
	}

	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cc, err := configclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	act := provider.New(mgr.GetClient(), kc, cc, mgr.GetEventRecorderFor("openstack_controller"), log.WithName("openstack"))
	if err := machineset.Add(mgr, opts, gate); err != nil {
		return fmt.Errorf("MachineSet controller: %w", err)
	}
	// The machine controller and, beside it, the drain controller.
	if err := machine.AddWithActuator(mgr, act, gate); err != nil {
		return fmt.Errorf("machine controller: %w", err)
	}
	if err := nodelink.Add(mgr, opts); err != nil {
		return fmt.Errorf("nodelink controller: %w", err)
	}
	// The masters' ControlPlaneMachineSet and etcd's hooks on them, played (package controlplane).
	if err := controlplane.Add(mgr, namespace, log.WithName("controlplanemachineset")); err != nil {
		return fmt.Errorf("ControlPlaneMachineSet controller: %w", err)
	}
	klog.Infof("machine-api-openstack: MachineSet, machine (OpenStack), drain, nodelink and ControlPlaneMachineSet controllers starting in namespace %s", namespace)
	return mgr.Start(ctx)
}
