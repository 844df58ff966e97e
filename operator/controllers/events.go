package controllers

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/manila-setup/manila-setup/operator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/gentype"
	"k8s.io/klog/v2"
)

// Recorder records significant changes (an operand created, Manila appearing or going away)
// as Kubernetes Events. Messages never carry secret values.
type Recorder interface {
	Eventf(reason, messageFmt string, args ...any)
	Warningf(reason, messageFmt string, args ...any)
}

// kubeRecorder writes Events about the operator's Deployment into its namespace.
type kubeRecorder struct {
	events *gentype.Client[*corev1.Event]
	ref    corev1.ObjectReference
	host   string
}

func newKubeRecorder(k *kubeClients, namespace string) *kubeRecorder {
	host, _ := os.Hostname()
	return &kubeRecorder{
		events: k.events(namespace),
		ref:    corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: namespace, Name: operator.OperatorName},
		host:   host,
	}
}

func (r *kubeRecorder) Eventf(reason, messageFmt string, args ...any) {
	r.record(corev1.EventTypeNormal, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *kubeRecorder) Warningf(reason, messageFmt string, args ...any) {
	r.record(corev1.EventTypeWarning, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *kubeRecorder) record(eventType, reason, message string) {
	klog.V(2).Infof("event %s %s: %s", eventType, reason, message)
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", r.ref.Name, now.UnixNano()), Namespace: r.ref.Namespace},
		InvolvedObject:      r.ref,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: operator.OperatorName, Host: r.host},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: operator.OperatorName,
		ReportingInstance:   r.host,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		klog.Warningf("recording event %s: %s", reason, apiReason(err))
	}
}
