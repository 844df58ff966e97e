// Package kubeconfig is the one place where manila-setup, its wizard and its operator turn a
// --kubeconfig flag into a client configuration: the same paths (a file, or a list in
// $KUBECONFIG's form, else $KUBECONFIG, else ~/.kube/config), the same context override, the
// same client-side rate and user agent, and the pod's service account where the caller allows it.
package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/manila-setup/manila-setup/internal/inputfile"
)

// Options say where the configuration comes from and how the clients behave.
type Options struct {
	// Path is --kubeconfig: one file, or several joined as in $KUBECONFIG. Empty: $KUBECONFIG,
	// then ~/.kube/config.
	Path string
	// Context overrides the kubeconfig's current context.
	Context string
	// InCluster lets a process in a pod use its service account when no Path is given and
	// no default kubeconfig file exists (the operator in its Deployment). A Path given that does
	// not exist stays an error.
	InCluster bool
	// UserAgent names the client in the API server's audit log, e.g. "manila-setup/v0.4.0".
	UserAgent string
	// QPS and Burst of the client-side rate limiter; zero means DefaultQPS and DefaultBurst.
	QPS   float32
	Burst int
	// Timeout bounds each request; zero means none (watches need none).
	Timeout time.Duration
}

// Patching or listing hundreds of MachineSets is one request each: client-go's default of 5
// requests a second would make a 200-set patch take 40 s for no reason.
const (
	DefaultQPS   = 100
	DefaultBurst = 200
)

// DefaultPath is what an empty Path stands for: $KUBECONFIG (a list allowed), else
// ~/.kube/config; empty when neither is known.
func DefaultPath() string {
	if p := os.Getenv("KUBECONFIG"); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".kube", "config")
	}
	return ""
}

// Paths returns the files Path names, with the defaults applied.
func (o Options) Paths() []string {
	p := o.Path
	if p == "" {
		p = DefaultPath()
	}
	return filepath.SplitList(p)
}

func (o Options) rules() *clientcmd.ClientConfigLoadingRules {
	rules := &clientcmd.ClientConfigLoadingRules{}
	switch paths := o.Paths(); len(paths) {
	case 0:
	case 1:
		rules.ExplicitPath = paths[0]
	default:
		rules.Precedence = paths
	}
	return rules
}

// describe names the source for error messages: the path as given, else the default used.
func (o Options) describe() string {
	if o.Path != "" {
		return o.Path
	}
	return filepath.Join(o.Paths()...)
}

// noFile tells whether none of the files exists (so the in-cluster configuration may be used).
func (o Options) noFile() bool {
	for _, p := range o.Paths() {
		if _, err := os.Stat(p); err == nil {
			return false
		}
	}
	return true
}

// ErrNoConfig: no kubeconfig file and not in a pod (or the caller did not allow the pod's).
var ErrNoConfig = errors.New("no kubeconfig")

// clientConfig is the kubeconfig files as client-go reads them, once each is known to be safe to
// read: a regular file no larger than a kubeconfig may be (inputfile.Kubeconfig); a stream (the
// pipe of `--kubeconfig <(oc config view --raw)`, a device given by mistake) is read here,
// bounded and stopped with ctx, and handed over as content. client-go itself would read either
// whole, without a limit and past Ctrl-C.
func (o Options) clientConfig(ctx context.Context, overrides *clientcmd.ConfigOverrides) (clientcmd.ClientConfig, error) {
	paths := o.Paths()
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			continue // client-go says what is missing, as it does for the default path
		}
		if err := inputfile.Check(p, st, inputfile.Kubeconfig); err != nil {
			return nil, err
		}
		if !inputfile.IsStream(st) {
			continue
		}
		if len(paths) > 1 {
			return nil, fmt.Errorf("%s is not a regular file (a pipe or a device), which client-go reads only alone: give it alone with --kubeconfig", p)
		}
		data, err := inputfile.ReadFile(ctx, p, inputfile.Kubeconfig)
		if err != nil {
			return nil, err
		}
		cfg, err := clientcmd.Load(data)
		if err != nil {
			return nil, err
		}
		return clientcmd.NewNonInteractiveClientConfig(*cfg, overrides.CurrentContext, overrides, nil), nil
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(o.rules(), overrides), nil
}

// RESTConfig returns the client configuration. Errors name the kubeconfig and the context; ctx
// ends a read of a kubeconfig that is a stream.
func RESTConfig(ctx context.Context, o Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.InCluster && o.Path == "" && o.noFile() {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("%w (%s) and not running in a cluster: %v; pass --kubeconfig or set KUBECONFIG", ErrNoConfig, o.describe(), err)
		}
	} else {
		var cc clientcmd.ClientConfig
		if cc, err = o.clientConfig(ctx, &clientcmd.ConfigOverrides{CurrentContext: o.Context}); err == nil {
			cfg, err = cc.ClientConfig()
		}
		if err != nil {
			where := "kubeconfig " + o.describe()
			if o.Context != "" {
				where += fmt.Sprintf(", context %q", o.Context)
			}
			return nil, fmt.Errorf("%s: %w; pass --kubeconfig or set KUBECONFIG", where, err)
		}
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	}
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	cfg.Timeout = o.Timeout
	return cfg, nil
}

// Raw returns the kubeconfig itself (its contexts, for a choice), merged as RESTConfig reads it.
func Raw(ctx context.Context, o Options) (clientcmdapi.Config, error) {
	cc, err := o.clientConfig(ctx, &clientcmd.ConfigOverrides{})
	var raw clientcmdapi.Config
	if err == nil {
		raw, err = cc.RawConfig()
	}
	if err != nil {
		return raw, fmt.Errorf("kubeconfig %s cannot be read: %w; pass --kubeconfig or set KUBECONFIG", o.describe(), err)
	}
	return raw, nil
}

// Namespace is the namespace of the kubeconfig's current context (or o.Context), as kubectl
// takes it when -n is not given: "default" when the context names none.
func Namespace(ctx context.Context, o Options) (string, error) {
	cc, err := o.clientConfig(ctx, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s cannot be read: %w; pass --kubeconfig or set KUBECONFIG", o.describe(), err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s: %w", o.describe(), err)
	}
	return ns, nil
}
