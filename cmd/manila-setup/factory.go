package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	operatorclient "github.com/openshift/client-go/operator/clientset/versioned"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/workers"
)

// What every command gets the same way, whatever it does: its user agent, its cluster
// configuration (internal/kubeconfig), its cloud connection (internal/openstack, the only reader
// of clouds.yaml), and the order and context of its run (internal/cmdrun).

// userAgent names this CLI in the API server's audit log and in the cloud's logs.
func userAgent() string { return "manila-setup/" + version }

// kubeOptions is how the commands read the kubeconfig: --kubeconfig (a path list allowed), else
// $KUBECONFIG, else ~/.kube/config, with this CLI's user agent; kubeContext "" is its current
// context.
func (g *GlobalOptions) kubeOptions(kubeContext string) kubeconfig.Options {
	return kubeconfig.Options{Path: g.Kubeconfig, Context: kubeContext, UserAgent: userAgent()}
}

// restConfig is the commands' cluster configuration (kubeOptions), read by internal/kubeconfig.
// Errors are environment errors (exit 2) and name the kubeconfig; ctx ends the read of a
// kubeconfig that is a stream.
func (g *GlobalOptions) restConfig(ctx context.Context) (*rest.Config, error) {
	return restConfigOf(ctx, g.kubeOptions(""))
}

func restConfigOf(ctx context.Context, o kubeconfig.Options) (*rest.Config, error) {
	cfg, err := kubeconfig.RESTConfig(ctx, o)
	if err != nil {
		return nil, environmentError(err)
	}
	return cfg, nil
}

// restConfigOrPod is restConfig, except in a pod without a kubeconfig (oc adm must-gather runs
// the image so, with a cluster-admin service account): there it is the pod's service account.
func (g *GlobalOptions) restConfigOrPod(ctx context.Context) (*rest.Config, error) {
	if _, err := os.Stat(g.Kubeconfig); err != nil && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return restConfigOf(ctx, kubeconfig.Options{InCluster: true, UserAgent: userAgent()})
	}
	return g.restConfig(ctx)
}

// clusterClients are the clients of the cluster of --kubeconfig that the commands use.
type clusterClients struct {
	// host is the API server's address, for messages.
	host     string
	machines machineclient.Interface
	kube     kubernetes.Interface
	dynamic  dynamic.Interface  // Cluster API objects, NodePools, HostedClusters
	meta     metadata.Interface // the objects diagnose only needs the metadata of
	operator operatorclient.Interface
}

// workers is the use case over these clients.
func (c *clusterClients) workers() workers.Cluster {
	return workers.Cluster{Machines: c.machines, Kube: c.kube, Dynamic: c.dynamic}
}

// clients connects to the cluster of --kubeconfig (restConfig), once per command: a command
// that asks again gets the same clients. Errors are environment errors. GlobalOptions.newClients,
// when set, makes them instead (fake clients for a unit test where a real server adds nothing).
func (g *GlobalOptions) clients(ctx context.Context) (*clusterClients, error) {
	return g.clientsWith(ctx, g.restConfig)
}

// podClients are clients, from restConfigOrPod: for must-gather, which also runs in a pod.
func (g *GlobalOptions) podClients(ctx context.Context) (*clusterClients, error) {
	return g.clientsWith(ctx, g.restConfigOrPod)
}

func (g *GlobalOptions) clientsWith(ctx context.Context, config func(context.Context) (*rest.Config, error)) (*clusterClients, error) {
	if g.cluster != nil {
		return g.cluster, nil
	}
	if g.newClients != nil {
		c, err := g.newClients()
		g.cluster = c
		return c, err
	}
	cfg, err := config(ctx)
	if err != nil {
		return nil, err
	}
	c, err := clientsFor(cfg)
	if err != nil {
		return nil, environmentError(err)
	}
	g.cluster = c
	return c, nil
}

// wizardRequestTimeout bounds each request of the wizard to the cluster: its screens wait for
// the answers, and a cluster that does not answer must not hold them without end.
const wizardRequestTimeout = 30 * time.Second

// contextClients are the clients of the context kubeContext of --kubeconfig ("" its current
// one), each request bounded by wizardRequestTimeout: for the wizard, whose first screen chooses
// the context, and which may go back and choose another (so they are not kept as clients are).
func (g *GlobalOptions) contextClients(ctx context.Context, kubeContext string) (*clusterClients, error) {
	o := g.kubeOptions(kubeContext)
	o.Timeout = wizardRequestTimeout
	cfg, err := kubeconfig.RESTConfig(ctx, o)
	if err != nil {
		return nil, err
	}
	return clientsFor(cfg)
}

// clientsFor makes the clients of cfg; nothing is contacted.
func clientsFor(cfg *rest.Config) (*clusterClients, error) {
	mc, err := machineclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	oc, err := operatorclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clusterClients{host: cfg.Host, machines: mc, kube: kc, dynamic: dyn, meta: meta, operator: oc}, nil
}

// wrapOpenStackTransport lets tests count and inspect the CLI's HTTP requests. Nil in production.
var wrapOpenStackTransport func(http.RoundTripper) http.RoundTripper

// cloudOptions are a command's connection to the cloud: the global --os-cloud,
// --os-client-config-file and -v, and --ca-bundle and --timeout where the command offers them
// (addFlags).
type cloudOptions struct {
	global  *GlobalOptions
	streams IOStreams

	CABundle string
	Timeout  time.Duration // zero: openstack.DefaultTimeout
}

func (o *cloudOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CABundle, "ca-bundle", "", "PEM file of the CAs to trust for the cloud's endpoints (instead of cacert in clouds.yaml)")
	fs.DurationVar(&o.Timeout, "timeout", openstack.DefaultTimeout, "longest time one request to the cloud may take")
}

func (o *cloudOptions) validate() error {
	if o.Timeout <= 0 {
		return usageError("--timeout: Invalid value: %q: must be a positive duration such as 30s", o.Timeout)
	}
	if o.CABundle != "" {
		if _, err := os.Stat(o.CABundle); err != nil {
			return usageError("--ca-bundle: Invalid value: %q: %v", o.CABundle, errors.Unwrap(err))
		}
	}
	return nil
}

// config is the connection to cloud ("" lets internal/openstack choose): this CLI's user agent,
// and, with errOut, warnings and with -v the requests on it (-vv with their headers, secrets
// never). Without errOut nothing is written (the wizard owns the terminal).
func (o *cloudOptions) config(cloud string, errOut io.Writer) openstack.Config {
	g := o.global
	cfg := openstack.Config{
		Cloud:         cloud,
		CloudsFile:    g.OSClientConfigFile,
		CABundle:      o.CABundle,
		Timeout:       o.Timeout,
		UserAgent:     userAgent(),
		WrapTransport: wrapOpenStackTransport,
	}
	if errOut == nil {
		return cfg
	}
	cfg.Warnf = func(format string, a ...any) { fmt.Fprintf(errOut, "warning: "+format+"\n", a...) }
	if g.Verbosity >= 1 {
		cfg.Logf = func(format string, a ...any) { fmt.Fprintf(errOut, "openstack: "+format+"\n", a...) }
		cfg.LogHeaders = g.Verbosity >= 2
	}
	return cfg
}

// connect authenticates to the cloud of --os-cloud once; every call of the command reuses that
// token.
func (o *cloudOptions) connect(ctx context.Context) (*openstack.Client, error) {
	return o.connectTo(ctx, o.global.OSCloud, o.streams.ErrOut)
}

// connectTo is the one way the commands connect to a cloud. Errors are environment errors
// (exit 2).
func (o *cloudOptions) connectTo(ctx context.Context, cloud string, errOut io.Writer) (*openstack.Client, error) {
	c, err := openstack.Connect(ctx, o.config(cloud, errOut))
	if err != nil {
		return nil, environmentError(err)
	}
	if errOut != nil && o.global.Verbosity >= 1 {
		fmt.Fprintf(errOut, "openstack: cloud %q, region %q, %s\n", c.Cloud(), c.Region(), c.Identity())
	}
	return c, nil
}
