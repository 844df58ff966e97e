package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// countingSource is a ManilaSource that answers from fields and counts the calls.
type countingSource struct {
	types                      []operator.ShareType
	nets                       []ShareNetwork
	typeCalls, netCalls, finds atomic.Int32
}

func (s *countingSource) Detect(context.Context) error { return nil }
func (s *countingSource) ShareTypes(context.Context) ([]operator.ShareType, error) {
	s.typeCalls.Add(1)
	return s.types, nil
}
func (s *countingSource) ShareNetworks(context.Context) ([]ShareNetwork, error) {
	s.netCalls.Add(1)
	return s.nets, nil
}
func (s *countingSource) Discover(context.Context) (*openstack.Ranking, error) {
	s.finds.Add(1)
	return &openstack.Ranking{}, nil
}
func (s *countingSource) SharesWithRulesNotActive(context.Context) (map[string]string, error) {
	return nil, nil
}

func testPoller(src ManilaSource, credsErr error) (*manilaPoller, *machinery.Published[manilaFindings]) {
	published := &machinery.Published[manilaFindings]{}
	return newManilaPoller(manilaPollerInputs{
		resync: time.Hour, openStackTimeout: time.Second,
		credentials: func() (*operator.Credentials, error) {
			if credsErr != nil {
				return nil, credsErr
			}
			return &operator.Credentials{CloudName: "openstack"}, nil
		},
		newSource: func(*operator.Credentials, time.Duration) (ManilaSource, error) { return src, nil },
		storage:   &storageNetworks{}, findings: published,
	}), published
}

// One share-type list per resync, whatever makes the controller sync in between: the syncs
// reuse the published answer. Discovery runs beside the first check.
func TestManilaPollerAsksOncePerResync(t *testing.T) {
	src := &countingSource{types: []operator.ShareType{{Name: "default"}}}
	p, published := testPoller(src, nil)
	first, err := p.poll(context.Background())
	if err != nil || first.Err != nil || len(first.ShareTypes) != 1 || first.At.IsZero() {
		t.Fatalf("first poll: %+v, %v", first, err)
	}
	if published.Load() != first {
		t.Error("the answer was not published")
	}
	for range 5 {
		if again, _ := p.poll(context.Background()); again != first {
			t.Errorf("a poll within the resync asked again: %+v", again)
		}
	}
	if n := src.typeCalls.Load(); n != 1 {
		t.Errorf("%d share-type lists, want 1", n)
	}
	if n := src.finds.Load(); n != 1 {
		t.Errorf("%d discoveries, want 1", n)
	}
	if n := src.netCalls.Load(); n != 0 {
		t.Errorf("%d share-network lists without a DHSS share type, want 0", n)
	}
}

// Share networks are listed only for DHSS share types; none offered is a NoShareTypes error.
func TestManilaPollerFindings(t *testing.T) {
	src := &countingSource{types: []operator.ShareType{{Name: "dhss", DHSS: true}}, nets: []ShareNetwork{{ID: "sn"}}}
	p, _ := testPoller(src, nil)
	found, _ := p.poll(context.Background())
	if len(found.ShareNetworks) != 1 || found.NetErr != nil || src.netCalls.Load() != 1 {
		t.Errorf("DHSS: %+v, %d share-network lists", found, src.netCalls.Load())
	}

	p, published := testPoller(&countingSource{}, nil)
	found, _ = p.poll(context.Background())
	var me *ManilaError
	if !errors.As(found.Err, &me) || me.Reason != ReasonNoShareTypes || found.ShareTypes != nil {
		t.Errorf("no share types: %+v", found)
	}
	if published.Load().shareTypeNames() != nil {
		t.Error("share type names published after a failed check")
	}

	// Without credentials Manila is not asked, and nothing is published.
	p, published = testPoller(src, errors.New("no Secret"))
	if found, err := p.poll(context.Background()); err == nil || found != nil || published.Load() != nil {
		t.Errorf("without credentials: %+v, %v, published %+v", found, err, published.Load())
	}
}
