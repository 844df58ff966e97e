package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// manilaFindings is what the Manila poller learned at its last check of Manila, published for
// the controllers. Nobody changes it once published: the slices are shared by every reader.
type manilaFindings struct {
	// ShareTypes are the share types Manila offered; nil when it did not answer (Err).
	ShareTypes []operator.ShareType
	Err        error
	// ShareNetworks are the project's share networks, listed only when a share type has
	// driver_handles_share_servers=true; NetErr is why they could not be listed.
	ShareNetworks []ShareNetwork
	NetErr        error
	At            time.Time
}

// shareTypeNames are the names Manila offered at the last check; nil when it was not asked yet
// or did not answer.
func (f *manilaFindings) shareTypeNames() []string {
	if f == nil || f.Err != nil || f.ShareTypes == nil {
		return nil
	}
	names := make([]string, 0, len(f.ShareTypes))
	for _, t := range f.ShareTypes {
		names = append(names, t.Name)
	}
	return names
}

// discoveryEvery is how many resyncs apart discovery runs: it lists networks, subnets, shares
// and share networks, so it is much dearer than the share type check, and the storage network
// rarely changes.
const discoveryEvery = 10

// manilaPollerInputs is what the poller needs: how to reach Manila, how often, and where to
// put what it learns.
type manilaPollerInputs struct {
	resync           time.Duration
	openStackTimeout time.Duration
	credentials      func() (*operator.Credentials, error)
	proxy            func(*http.Request) (*url.URL, error)
	newSource        func(*operator.Credentials, time.Duration) (ManilaSource, error)
	// storage gets what discovery finds of the storage network.
	storage *storageNetworks
	// accessRules counts the driver's volumes whose access rules are not active; nil where the
	// driver is the platform's.
	accessRules *accessRuleCheck
	// findings is where it publishes what it learned.
	findings *machinery.Published[manilaFindings]
}

// manilaPoller asks Manila for its share types (and, when needed, share networks) at most once
// per resync, whatever the cluster events that make the Manila controller sync: the syncs
// between two checks reuse the last answer. It runs discovery of the storage network beside the
// check every discoveryEvery resyncs, and the access-rule check after it.
type manilaPoller struct {
	manilaPollerInputs

	mu        sync.Mutex
	sourceKey [32]byte
	source    ManilaSource
	// last is the last answer, from checkedSrc: reused only for the same credentials.
	last       *manilaFindings
	checkedSrc ManilaSource
}

func newManilaPoller(in manilaPollerInputs) *manilaPoller {
	return &manilaPoller{manilaPollerInputs: in}
}

// poll returns what Manila answered at the last check, checking again when that is older than
// most of a resync (or the credentials changed). The error is for what kept it from asking at
// all (no credentials, an unusable clouds.yaml): that is not published, as no check was made.
// What Manila answered, even an error, is in the findings.
func (p *manilaPoller) poll(ctx context.Context) (*manilaFindings, error) {
	creds, err := p.credentials()
	if err != nil {
		return nil, err
	}
	creds.Proxy = p.proxy
	src, err := p.sourceFor(creds)
	if err != nil {
		if operator.IsCredentialsError(err) {
			return nil, &ManilaError{Reason: ReasonAuthFailed, Message: err.Error()}
		}
		return nil, err
	}
	p.mu.Lock()
	last, lastSrc := p.last, p.checkedSrc
	p.mu.Unlock()
	if last != nil && lastSrc == src && time.Since(last.At) < p.resync*9/10 {
		return last, nil
	}
	found := p.check(ctx, src)
	found.At = time.Now()
	p.mu.Lock()
	p.last, p.checkedSrc = found, src
	p.mu.Unlock()
	p.findings.Publish(found)
	return found, nil
}

// sourceFor returns the ManilaSource for these credentials, reusing it (and its token) while
// the credentials stay the same.
func (p *manilaPoller) sourceFor(creds *operator.Credentials) (ManilaSource, error) {
	y, _ := creds.AuthYAML()
	key := sha256.Sum256(bytes.Join([][]byte{y, creds.CAPEM, creds.ClientCertPEM, creds.ClientKeyPEM}, []byte{0}))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.source != nil && key == p.sourceKey {
		return p.source, nil
	}
	s, err := p.newSource(creds, p.openStackTimeout)
	if err != nil {
		return nil, err
	}
	p.source, p.sourceKey = s, key
	return s, nil
}

// check asks Manila once; an error in the findings is a *ManilaError with a reason, or what
// the source returned.
func (p *manilaPoller) check(ctx context.Context, src ManilaSource) *manilaFindings {
	ctx, cancel := context.WithTimeout(ctx, 3*p.openStackTimeout)
	defer cancel()
	if err := src.Detect(ctx); err != nil {
		return &manilaFindings{Err: err}
	}
	// Discovery (networks, subnets, shares, share networks: Neutron's and Manila's answers)
	// runs beside the share type list rather than after it: the StorageClasses' nfs-shareClient
	// waits for both, and the first class is written as soon as both answered.
	discovered := func() {}
	if p.storage.due(src, discoveryEvery*p.resync) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.discover(src)
		}()
		discovered = func() { <-done }
	}
	defer discovered()
	types, err := src.ShareTypes(ctx)
	if err != nil {
		return &manilaFindings{Err: err}
	}
	if p.accessRules != nil {
		p.accessRules.check(ctx, src)
	}
	if len(types) == 0 {
		return &manilaFindings{Err: &ManilaError{Reason: ReasonNoShareTypes, Message: "Manila is in the Keystone catalog but offers no share types to this project: ask the cloud admin for one"}}
	}
	found := &manilaFindings{ShareTypes: slices.Clone(types)}
	// Share networks matter only for share types with driver_handles_share_servers=true.
	if slices.ContainsFunc(types, func(t operator.ShareType) bool { return t.DHSS }) {
		found.ShareNetworks, found.NetErr = src.ShareNetworks(ctx)
	}
	return found
}

// discover runs discovery of the storage network and records what it found.
func (p *manilaPoller) discover(src ManilaSource) {
	dctx, cancel := context.WithTimeout(context.Background(), 3*p.openStackTimeout)
	found, err := src.Discover(dctx)
	cancel()
	p.storage.discovered(src, found, err)
	if err != nil {
		klog.Infof("discovering the storage network: %v", err)
		return
	}
	for _, cand := range found.Candidates {
		klog.V(2).Infof("storage network candidate %s: score %d, %s confidence", cand.Network.Label(), cand.Score, cand.Confidence)
	}
}
