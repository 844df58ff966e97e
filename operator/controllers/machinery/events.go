package machinery

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/gentype"
	"k8s.io/klog/v2"
)

// Recorder records significant changes (an operand created, Manila appearing or going away)
// as Kubernetes Events. Messages never carry secret values.
type Recorder interface {
	Eventf(reason, messageFmt string, args ...any)
	Warningf(reason, messageFmt string, args ...any)
	// WarningOn records a Warning about another object (a StorageClass, say).
	WarningOn(ref corev1.ObjectReference, reason, messageFmt string, args ...any)
}

// kubeRecorder writes Events about the operator's Deployment into its namespace.
type kubeRecorder struct {
	events *gentype.Client[*corev1.Event]
	// clusterEvents writes Events about cluster-scoped objects, which the API server keeps in
	// namespace "default".
	clusterEvents *gentype.Client[*corev1.Event]
	// eventsIn writes Events about objects of other namespaces.
	eventsIn func(namespace string) *gentype.Client[*corev1.Event]
	ref      corev1.ObjectReference
	host     string
}

// NewKubeRecorder writes Events about the Deployment operatorName of namespace.
func NewKubeRecorder(k *Clients, namespace, operatorName string) Recorder {
	host, _ := os.Hostname()
	return &kubeRecorder{
		events:        k.Events(namespace),
		clusterEvents: k.Events(metav1.NamespaceDefault),
		eventsIn:      k.Events,
		ref:           corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: namespace, Name: operatorName},
		host:          host,
	}
}

func (r *kubeRecorder) Eventf(reason, messageFmt string, args ...any) {
	r.record(corev1.EventTypeNormal, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *kubeRecorder) Warningf(reason, messageFmt string, args ...any) {
	r.record(corev1.EventTypeWarning, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *kubeRecorder) WarningOn(ref corev1.ObjectReference, reason, messageFmt string, args ...any) {
	r.recordAbout(ref, corev1.EventTypeWarning, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *kubeRecorder) record(eventType, reason, message string) {
	r.recordAbout(r.ref, eventType, reason, message)
}

// recordAbout writes an Event about ref: in the operator's namespace for its own objects, in
// "default" for cluster-scoped ones (where the API server wants them, and where `kubectl
// describe storageclass` finds them), in the object's own namespace for a user's (a
// VolumeSnapshot: `kubectl describe` finds it there).
func (r *kubeRecorder) recordAbout(ref corev1.ObjectReference, eventType, reason, message string) {
	client, ns := r.events, r.ref.Namespace
	switch {
	case ref.Namespace == "":
		client, ns = r.clusterEvents, metav1.NamespaceDefault
	case ref.Namespace != r.ref.Namespace && r.eventsIn != nil:
		client, ns = r.eventsIn(ref.Namespace), ref.Namespace
	}
	klog.V(2).Infof("event %s %s: %s", eventType, reason, message)
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: r.ref.Name, Host: r.host},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: r.ref.Name,
		ReportingInstance:   r.host,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		klog.Warningf("recording event %s: %s", reason, APIReason(err))
	}
}

// APIReason is an API error's reason and code, without the object it carried.
func APIReason(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return fmt.Sprintf("%s (HTTP %d)", st.Reason, st.Code)
	}
	return "request failed"
}
