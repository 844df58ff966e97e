package machinery

import (
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
)

// Two controllers' handlers through one Events get every event of the informer, from one
// registration on it.
func TestEventsShareOneRegistration(t *testing.T) {
	source := fcache.NewFakeControllerSource()
	source.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}})
	inf := cache.NewSharedIndexInformer(source, &corev1.ConfigMap{}, 0, cache.Indexers{})
	events := NewEvents()
	var a, b atomic.Int32
	counter := func(n *atomic.Int32) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{AddFunc: func(any) { n.Add(1) }, UpdateFunc: func(any, any) { n.Add(1) }}
	}
	syncedA, err := events.register(inf, counter(&a))
	if err != nil {
		t.Fatal(err)
	}
	syncedB, err := events.register(inf, counter(&b))
	if err != nil {
		t.Fatal(err)
	}
	if len(events.fanouts) != 1 {
		t.Fatalf("%d registrations on one informer, want 1", len(events.fanouts))
	}
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	if !cache.WaitForCacheSync(stop, syncedA, syncedB) {
		t.Fatal("not synced")
	}
	source.Modify(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Data: map[string]string{"k": "v"}})
	deadline := time.Now().Add(10 * time.Second)
	for (a.Load() < 2 || b.Load() < 2) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a.Load() != 2 || b.Load() != 2 {
		t.Errorf("events seen: %d and %d, want 2 each (the add and the update)", a.Load(), b.Load())
	}
}
