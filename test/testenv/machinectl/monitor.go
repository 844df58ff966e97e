package machinectl

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// ReadyMonitor records, from the moment it starts, every change to the Machines of a selector
// and to all Nodes, and computes the Ready count (Machines without a deletionTimestamp whose
// Node is Ready) after each one. Events of the two watches are put back in the order etcd
// committed them (resourceVersions of one etcd are its revisions, shared by all resources), so
// the count is exact: no dip or peak is made up by one watch delivering before the other, and
// none is missed between two polls.
type ReadyMonitor struct {
	selector labels.Selector
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	base     []event
	events   []event
	watchErr error
}

type event struct {
	rv      int64
	kind    watch.EventType
	machine *machinev1beta1.Machine
	node    *corev1.Node
}

// ReadyStats is what a monitor saw.
type ReadyStats struct {
	// MinReady and MaxReady bound the Ready count over the whole time; MaxLive is the most
	// Machines (without a deletionTimestamp) that existed at once.
	MinReady, MaxReady, MaxLive int
	// Start and End are the counts when the monitor started and stopped.
	StartReady, EndReady int
	// Events is how many changes were replayed.
	Events int
	// Series lists the Ready count after each change that moved it, as "rv:count".
	Series []string
}

func (s ReadyStats) String() string {
	return fmt.Sprintf("ready min %d max %d (start %d, end %d), live max %d, %d events; series %v",
		s.MinReady, s.MaxReady, s.StartReady, s.EndReady, s.MaxLive, s.Events, s.Series)
}

// WatchReady starts a monitor of the Machines matching selector (e.g.
// "machine.openshift.io/cluster-api-machineset=ostest-worker-0") on a sim cluster. Call Stop to
// end it and read the statistics.
func WatchReady(t testing.TB, c *testenv.SimCluster, selector string) *ReadyMonitor {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &ReadyMonitor{selector: sel, cancel: cancel}

	machines, err := mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range machines.Items {
		m.base = append(m.base, event{kind: watch.Added, machine: &machines.Items[i]})
	}
	for i := range nodes.Items {
		m.base = append(m.base, event{kind: watch.Added, node: &nodes.Items[i]})
	}
	mw, err := mc.MachineV1beta1().Machines(Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: machines.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	nw, err := kc.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: nodes.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []watch.Interface{mw, nw} {
		m.wg.Add(1)
		go m.consume(ctx, w)
	}
	t.Cleanup(func() { m.cancel(); m.wg.Wait() })
	return m
}

func (m *ReadyMonitor) consume(ctx context.Context, w watch.Interface) {
	defer m.wg.Done()
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				m.mu.Lock()
				if ctx.Err() == nil && m.watchErr == nil {
					m.watchErr = fmt.Errorf("a watch ended early: the statistics would miss events")
				}
				m.mu.Unlock()
				return
			}
			e := event{kind: ev.Type}
			var rv string
			switch o := ev.Object.(type) {
			case *machinev1beta1.Machine:
				e.machine, rv = o, o.ResourceVersion
			case *corev1.Node:
				e.node, rv = o, o.ResourceVersion
			default:
				m.mu.Lock()
				if m.watchErr == nil {
					m.watchErr = fmt.Errorf("watch error: %v", ev.Object)
				}
				m.mu.Unlock()
				continue
			}
			n, err := strconv.ParseInt(rv, 10, 64)
			m.mu.Lock()
			if err != nil && m.watchErr == nil {
				m.watchErr = fmt.Errorf("resourceVersion %q is not an etcd revision", rv)
			}
			e.rv = n
			m.events = append(m.events, e)
			m.mu.Unlock()
		}
	}
}

// Stop ends the watches and replays what they saw, in commit order.
func (m *ReadyMonitor) Stop() (ReadyStats, error) {
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watchErr != nil {
		return ReadyStats{}, m.watchErr
	}
	events := slices.Clone(m.events)
	slices.SortStableFunc(events, func(a, b event) int {
		switch {
		case a.rv < b.rv:
			return -1
		case a.rv > b.rv:
			return 1
		}
		return 0
	})
	machines := map[string]*machinev1beta1.Machine{}
	nodes := map[string]bool{}
	apply := func(e event) {
		switch {
		case e.machine != nil && e.kind == watch.Deleted:
			delete(machines, e.machine.Name)
		case e.machine != nil:
			machines[e.machine.Name] = e.machine
		case e.node != nil && e.kind == watch.Deleted:
			delete(nodes, e.node.Name)
		case e.node != nil:
			nodes[e.node.Name] = testenv.NodeReady(e.node)
		}
	}
	count := func() (ready, live int) {
		for _, mach := range machines {
			if mach.DeletionTimestamp != nil || !m.selector.Matches(labels.Set(mach.Labels)) {
				continue
			}
			live++
			if mach.Status.NodeRef != nil && nodes[mach.Status.NodeRef.Name] {
				ready++
			}
		}
		return
	}
	for _, e := range m.base {
		apply(e)
	}
	ready, live := count()
	st := ReadyStats{MinReady: ready, MaxReady: ready, MaxLive: live, StartReady: ready, Events: len(events)}
	st.Series = append(st.Series, fmt.Sprintf("start:%d", ready))
	last := ready
	for _, e := range events {
		apply(e)
		ready, live = count()
		st.MinReady, st.MaxReady, st.MaxLive = min(st.MinReady, ready), max(st.MaxReady, ready), max(st.MaxLive, live)
		if ready != last {
			st.Series = append(st.Series, fmt.Sprintf("%d:%d", e.rv, ready))
			last = ready
		}
	}
	st.EndReady = last
	return st, nil
}
