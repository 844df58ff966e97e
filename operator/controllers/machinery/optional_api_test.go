package machinery

import (
	"context"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// TestServedOrEmpty: an API the cluster does not serve lists as empty, with a watch that sends
// nothing; once it is served, lists and watches are the server's.
func TestServedOrEmpty(t *testing.T) {
	served := false
	realWatch := watch.NewFake()
	watched := 0
	lw := servedOrEmpty(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			if !served {
				return nil, apierrors.NewNotFound(schema.GroupResource{Group: "config.openshift.io", Resource: "infrastructures"}, "")
			}
			return &configv1.InfrastructureList{Items: []configv1.Infrastructure{{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			watched++
			return realWatch, nil
		},
	}, &configv1.InfrastructureList{})
	ctx := context.Background()

	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list of an absent API: %v, want an empty list", err)
	}
	if l, ok := obj.(*configv1.InfrastructureList); !ok || len(l.Items) != 0 {
		t.Fatalf("list of an absent API: %#v, want an empty InfrastructureList", obj)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
	if err != nil || watched != 0 {
		t.Fatalf("watch of an absent API: %v, the server's watch called %d times", err, watched)
	}
	select {
	case e, ok := <-w.ResultChan():
		t.Fatalf("the silent watch sent %v (open %t)", e, ok)
	case <-time.After(50 * time.Millisecond):
	}
	w.Stop()

	served = true
	obj, err = lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil || len(obj.(*configv1.InfrastructureList).Items) != 1 {
		t.Fatalf("list once served: %v, %#v", err, obj)
	}
	if w, err := lw.WatchWithContext(ctx, metav1.ListOptions{}); err != nil || w != realWatch || watched != 1 {
		t.Fatalf("watch once served: %v, the server's watch called %d times", err, watched)
	}
}

// TestSilentWatchEnds: the silent watch ends by itself, so that the informer lists again.
func TestSilentWatchEnds(t *testing.T) {
	w := silentWatch(10 * time.Millisecond)
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("the silent watch sent an event")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the silent watch did not end")
	}
	w.Stop() // a second stop is harmless
}
