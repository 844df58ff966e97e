package machinery

import (
	"net/http"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The operator talks to the API through REST clients over a scheme of the few API groups it
// reads and writes. client-go's clientset, its informer factories and library-go's controller
// machinery all register the scheme of every Kubernetes API group; initialising that and
// keeping its pages resident cost the operator about a fifth of its memory budget
// (docs/performance.md).
var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, storagev1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
		coordinationv1.AddToScheme, configv1.Install, operatorv1.Install,
	} {
		utilruntime.Must(add(scheme))
	}
}

// Clients holds one REST client per API group, all over one HTTP client and one client-side
// rate limiter, and the dynamic and metadata clients for kinds the scheme lacks.
type Clients struct {
	Core, Apps, RBAC, Storage, Policy, Networking, Coordination, Config, Operator rest.Interface
	Dynamic                                                                       dynamic.Interface
	Metadata                                                                      metadata.Interface
	// EventsCore is the core group for Events, with a rate limit of its own: each write of an
	// operand records an Event, and sharing the writes' limit doubled the requests the first
	// sync's 200 StorageClasses waited for. Nil: Core.
	EventsCore rest.Interface
}

// NewClients builds the clients of cfg.
func NewClients(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	k := &Clients{}
	for _, g := range []struct {
		gv  schema.GroupVersion
		out *rest.Interface
	}{
		{corev1.SchemeGroupVersion, &k.Core}, {appsv1.SchemeGroupVersion, &k.Apps}, {rbacv1.SchemeGroupVersion, &k.RBAC},
		{storagev1.SchemeGroupVersion, &k.Storage}, {policyv1.SchemeGroupVersion, &k.Policy}, {networkingv1.SchemeGroupVersion, &k.Networking},
		{coordinationv1.SchemeGroupVersion, &k.Coordination}, {configv1.GroupVersion, &k.Config}, {operatorv1.GroupVersion, &k.Operator},
	} {
		c, err := restClientFor(cfg, httpClient, g.gv)
		if err != nil {
			return nil, err
		}
		*g.out = c
	}
	if cfg.QPS > 0 {
		ec := rest.CopyConfig(cfg)
		ec.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
		if k.EventsCore, err = restClientFor(ec, httpClient, corev1.SchemeGroupVersion); err != nil {
			return nil, err
		}
	}
	if k.Dynamic, err = dynamic.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, err
	}
	if k.Metadata, err = metadata.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, err
	}
	return k, nil
}

func restClientFor(cfg *rest.Config, httpClient *http.Client, gv schema.GroupVersion) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientForConfigAndClient(c, httpClient)
}

// object is a pointer to an API type of the scheme.
type object[E any] interface {
	*E
	runtime.Object
	metav1.Object
}

// typed is a typed client of one resource (namespace "" for cluster-scoped ones).
func typed[T object[E], E any](c rest.Interface, resource, namespace string) *gentype.Client[T] {
	return gentype.NewClient[T](resource, c, parameterCodec, namespace, func() T { return T(new(E)) })
}

// Events is a typed client of the Events of a namespace.
func (k *Clients) Events(ns string) *gentype.Client[*corev1.Event] {
	if k.EventsCore != nil {
		return typed[*corev1.Event](k.EventsCore, "events", ns)
	}
	return typed[*corev1.Event](k.Core, "events", ns)
}

// Leases is a typed client of the Leases of a namespace.
func (k *Clients) Leases(ns string) *gentype.Client[*coordinationv1.Lease] {
	return typed[*coordinationv1.Lease](k.Coordination, "leases", ns)
}
