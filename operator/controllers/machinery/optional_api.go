package machinery

import (
	"context"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// absentRecheck is how long the informer of an API the cluster does not serve waits before it
// lists again, to notice the API once it is installed.
const absentRecheck = 5 * time.Minute

// servedOrEmpty makes lw, of a resource that a cluster may not serve at all (OpenShift's
// config.openshift.io on plain Kubernetes), list as empty where the API is absent: the informer
// then syncs, and the controllers that wait for it start, instead of waiting forever on a list
// that fails. Its watch stays silent for absentRecheck; then the informer lists again, which picks
// the API up if it has been installed since. empty is the resource's list type.
func servedOrEmpty(lw *cache.ListWatch, empty runtime.Object) *cache.ListWatch {
	var absent atomic.Bool
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := list(ctx, opts)
			if apierrors.IsNotFound(err) {
				absent.Store(true)
				return empty.DeepCopyObject(), nil
			}
			absent.Store(false)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if absent.Load() {
				return silentWatch(absentRecheck), nil
			}
			// A failed watch (the API absent, with a streaming list) makes the informer list.
			return watchFn(ctx, opts)
		},
		DisableChunking: lw.DisableChunking,
	}
}

// silentWatch sends no event and ends after d.
func silentWatch(d time.Duration) watch.Interface {
	w := watch.NewFake()
	time.AfterFunc(d, w.Stop)
	return w
}
