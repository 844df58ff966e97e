// Command capi-controllers runs, in one process, the real Cluster API controllers that turn a
// MachineDeployment into servers on OpenStack: Cluster API's core MachineDeployment, MachineSet
// and Machine controllers (sigs.k8s.io/cluster-api/controllers, with a ClusterCache that reaches
// the workload cluster through the <cluster>-kubeconfig Secret) and CAPO's OpenStackMachine and
// OpenStackServer controllers (sigs.k8s.io/cluster-api-provider-openstack/controllers). The
// tests (test/testenv/capireal) start it against a test apiserver and the loopback OpenStack.
//
// It is wired the way the two projects' own main.go files wire these reconcilers
// (sigs.k8s.io/cluster-api main.go setupReconcilers; sigs.k8s.io/cluster-api-provider-openstack
// main.go setupReconcilers), less what a test cluster has no use for: no webhooks (objects are
// created already defaulted), no metrics or health endpoints, no leader election, one namespace.
//
// Left out on purpose: the Cluster controller (the harness writes the Cluster's status as a
// provisioned cluster has it; without a control plane provider Cluster API would wait for a
// control-plane Machine to call the control plane initialized) and CAPO's OpenStackCluster
// controller (the harness fills the OpenStackCluster's status as for a pre-made network).
//
// This module is separate from the main one: Cluster API v1.9 and CAPO v0.12 build against
// controller-runtime v0.19 and Kubernetes v0.31 libraries, the main module uses v0.25 and v0.37.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	orcv1alpha1 "github.com/k-orc/openstack-resource-controller/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	capocontrollers "sigs.k8s.io/cluster-api-provider-openstack/controllers"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/scope"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/cluster-api/api/v1beta1/index"
	capicontrollers "sigs.k8s.io/cluster-api/controllers"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/remote"
	ipamv1 "sigs.k8s.io/cluster-api/exp/ipam/api/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig on the global one.
	flags := flag.NewFlagSet("capi-controllers", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the management cluster (required)")
	namespace := flags.String("namespace", "", "the one namespace whose objects are reconciled (required)")
	concurrency := flags.Int("concurrency", 2, "reconciles at once per controller")
	verbosity := flags.Int("v", 2, "log verbosity")
	_ = flags.Parse(os.Args[1:])
	if *kubeconfig == "" || *namespace == "" {
		fmt.Fprintln(os.Stderr, "capi-controllers: --kubeconfig and --namespace are required")
		os.Exit(2)
	}
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(*verbosity))))
	if err := run(ctrl.SetupSignalHandler(), *kubeconfig, *namespace, *concurrency); err != nil {
		klog.Background().Error(err, "capi-controllers stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace string, concurrency int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterv1.AddToScheme, ipamv1.AddToScheme,
		infrav1.AddToScheme, infrav1alpha1.AddToScheme, orcv1alpha1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	opts := controller.Options{MaxConcurrentReconciles: concurrency}

	// The Machine field indexes of Cluster API's own main.go (setupIndexes; its MachinePool and
	// ClusterClass ones are of objects a test cluster has not): the Machine controller maps a
	// Node event to its Machine through them (by node name, then by providerID). Without them
	// that lookup fails, and a Machine whose last reconcile came before its Node waits forever.
	for _, add := range []func(context.Context, ctrl.Manager) error{index.ByMachineNode, index.ByMachineProviderID} {
		if err := add(ctx, mgr); err != nil {
			return fmt.Errorf("adding Cluster API's Machine field indexes: %w", err)
		}
	}

	// The workload cluster is this same apiserver, reached through the Cluster's kubeconfig
	// Secret as Cluster API reaches any workload cluster; Nodes are found by providerID.
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetAPIReader(),
		Cache:        clustercache.CacheOptions{Indexes: []clustercache.CacheOptionsIndex{clustercache.NodeProviderIDIndex}},
		Client: clustercache.ClientOptions{
			UserAgent: remote.DefaultClusterAPIUserAgent("capi-controllers"),
			Cache: clustercache.ClientCacheOptions{DisableFor: []client.Object{
				&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Pod{}, &appsv1.DaemonSet{},
				&storagev1.VolumeAttachment{}, &corev1.PersistentVolume{},
			}},
		},
	}, opts)
	if err != nil {
		return fmt.Errorf("creating the ClusterCache: %w", err)
	}

	api := mgr.GetAPIReader()
	c := mgr.GetClient()
	for name, setup := range map[string]func() error{
		"MachineDeployment": func() error {
			return (&capicontrollers.MachineDeploymentReconciler{Client: c, APIReader: api}).SetupWithManager(ctx, mgr, opts)
		},
		"MachineSet": func() error {
			return (&capicontrollers.MachineSetReconciler{Client: c, APIReader: api, ClusterCache: clusterCache}).SetupWithManager(ctx, mgr, opts)
		},
		"Machine": func() error {
			return (&capicontrollers.MachineReconciler{Client: c, APIReader: api, ClusterCache: clusterCache, RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, opts)
		},
	} {
		if err := setup(); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", name, err)
		}
	}

	scopeFactory := scope.NewFactory(10)
	if err := (&capocontrollers.OpenStackMachineReconciler{
		Client: c, Recorder: mgr.GetEventRecorderFor("openstackmachine-controller"), ScopeFactory: scopeFactory,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("setting up the OpenStackMachine controller: %w", err)
	}
	if err := (&capocontrollers.OpenStackServerReconciler{
		Client: c, Recorder: mgr.GetEventRecorderFor("openstackserver-controller"), ScopeFactory: scopeFactory, Scheme: mgr.GetScheme(),
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("setting up the OpenStackServer controller: %w", err)
	}
	return mgr.Start(ctx)
}
