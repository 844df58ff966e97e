package controllers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	configlisters "github.com/openshift/client-go/config/listers/config/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/tlsprofile"
)

// The cluster's TLS security profile (config.openshift.io APIServer "cluster",
// spec.tlsSecurityProfile) is applied where the operator serves TLS: the kube-rbac-proxy
// sidecars of the driver's controller (the workload controller renders it into their
// --tls-min-version and --tls-cipher-suites, and renders again when it changes), and the
// operator's own /metrics (each new connection takes the profile of the moment). Without the
// object (plain Kubernetes), and when its profile cannot be applied, Intermediate applies: TLS
// 1.2 and up, as before the profile was read at all.

// tlsProfileOf reads the profile from the cache; the error says why the cluster's could not be
// applied (Intermediate is returned then).
func tlsProfileOf(l configlisters.APIServerLister) func() (tlsprofile.Profile, error) {
	return func() (tlsprofile.Profile, error) {
		a, err := l.Get(machinery.APIServerName)
		if err != nil {
			return tlsprofile.FromAPIServer(nil)
		}
		return tlsprofile.FromAPIServer(a)
	}
}

// tlsProfileReport logs, and tells with a Warning Event, what happens to the cluster's profile:
// once per change, not at every sync.
type tlsProfileReport struct {
	what     string // where the profile applies, for the messages
	recorder machinery.Recorder

	mu      sync.Mutex
	noted   bool
	last    tlsprofile.Profile
	lastErr string
}

// TLSProfileInvalidReason is the reason of the Warning Event about a profile that cannot be
// applied.
const TLSProfileInvalidReason = "TLSSecurityProfileInvalid"

func (r *tlsProfileReport) note(p tlsprofile.Profile, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.mu.Lock()
	changed := !r.noted || !p.Equal(r.last)
	newErr := msg != "" && msg != r.lastErr
	r.noted, r.last, r.lastErr = true, p, msg
	r.mu.Unlock()
	if newErr {
		klog.Warningf("%s: the APIServer %s's TLS security profile cannot be applied: %s", r.what, machinery.APIServerName, msg)
		if r.recorder != nil {
			r.recorder.Warningf(TLSProfileInvalidReason, "%s: APIServer %s: %s", r.what, machinery.APIServerName, msg)
		}
	}
	if changed {
		klog.Infof("%s: TLS security profile %s", r.what, p)
	}
}

// tlsPolicy is the profile the operator's /metrics applies to each new connection (nil until
// it is known: the handshake is refused meanwhile, rather than made under a weaker profile).
type tlsPolicy struct {
	cur    atomic.Pointer[tlsprofile.Profile]
	report tlsProfileReport
}

func newTLSPolicy() *tlsPolicy {
	return &tlsPolicy{report: tlsProfileReport{what: "metrics"}}
}

// set makes p the profile of the connections to come.
func (t *tlsPolicy) set(p tlsprofile.Profile, err error) {
	t.report.note(p, err)
	t.cur.Store(&p)
}

// configForClient is the tls.Config.GetConfigForClient of a server whose other settings
// (certificate, protocols) are base's.
func (t *tlsPolicy) configForClient(base *tls.Config) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(*tls.ClientHelloInfo) (*tls.Config, error) {
		p := t.cur.Load()
		if p == nil {
			return nil, errors.New("the cluster's TLS security profile has not been read yet")
		}
		c := base.Clone()
		p.Apply(c)
		return c, nil
	}
}

// tlsProfileWait is how long the metrics endpoint waits for the APIServer's first answer
// before it serves under Intermediate (until an answer comes).
const tlsProfileWait = 30 * time.Second

// followTLSProfile keeps t on the cluster's profile until ctx ends, with an informer of its own
// over k: /metrics is served by every replica, the leader or not, and the operator's informers
// run only while it leads.
func followTLSProfile(ctx context.Context, k *machinery.Clients, t *tlsPolicy) {
	inf := machinery.NewAPIServerInformer(k)
	l := configlisters.NewAPIServerLister(inf.GetIndexer())
	read := tlsProfileOf(l)
	update := func(any) {
		if inf.HasSynced() {
			t.set(read())
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: update, UpdateFunc: func(_, o any) { update(o) }, DeleteFunc: update,
	})
	go inf.Run(ctx.Done())
	go func() {
		wait, cancel := context.WithTimeout(ctx, tlsProfileWait)
		synced := cache.WaitForCacheSync(wait.Done(), inf.HasSynced)
		cancel()
		if !synced {
			if ctx.Err() != nil {
				return
			}
			t.set(tlsprofile.Intermediate(), fmt.Errorf("APIServer %s not read within %s; Intermediate (VersionTLS12) applies until it is", machinery.APIServerName, tlsProfileWait))
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				return
			}
		}
		t.set(read())
	}()
}
