package nodepools

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/inuse"
)

// hostedTimeout bounds each request to a hosted cluster's API: an endpoint this machine cannot
// reach must turn into a reason, not a hang.
const hostedTimeout = 15 * time.Second

var secretGVR = corev1.SchemeGroupVersion.WithResource("secrets")

// Pool is a NodePool whose nodes are about to be replaced, and its HostedCluster.
type Pool struct{ Namespace, Name, HostedCluster string }

// Unseen is a NodePool whose hosted cluster could not be read, and why.
type Unseen struct {
	Pool   Pool
	Reason string
}

// HostedMounts finds, in the hosted cluster of each pool, the pods on the pool's nodes (label
// hypershift.openshift.io/nodePool=NAME) that use a Manila volume (inuse.ManilaMounts). The
// hosted cluster is read with the admin kubeconfig HyperShift keeps on the management cluster:
// the Secret that the HostedCluster's status.kubeconfig names, in its namespace, key
// "kubeconfig". A pool whose hosted cluster cannot be read is returned as unseen, with the
// reason: the caller refuses, as it would without this check. The kubeconfig is never printed.
func HostedMounts(ctx context.Context, dyn dynamic.Interface, pools []Pool) (mounts []attach.Mount, unseen []Unseen) {
	clients := map[string]kubernetes.Interface{}
	failed := map[string]string{}
	for _, p := range pools {
		key := p.Namespace + "/" + p.HostedCluster
		kube, seen := clients[key]
		if !seen && failed[key] == "" {
			var err error
			if kube, err = hostedClient(ctx, dyn, p.Namespace, p.HostedCluster); err != nil {
				failed[key] = err.Error()
			} else {
				clients[key] = kube
			}
		}
		if reason := failed[key]; reason != "" {
			unseen = append(unseen, Unseen{Pool: p, Reason: reason})
			continue
		}
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: hyperv1.NodePoolLabel + "=" + p.Name})
		if err != nil {
			unseen = append(unseen, Unseen{Pool: p, Reason: fmt.Sprintf("listing its nodes in HostedCluster %s: %v", key, err)})
			continue
		}
		names := make([]string, len(nodes.Items))
		for i, n := range nodes.Items {
			names[i] = n.Name
		}
		found, err := inuse.ManilaMounts(ctx, kube, names)
		if err != nil {
			unseen = append(unseen, Unseen{Pool: p, Reason: fmt.Sprintf("in HostedCluster %s: %v", key, err)})
			continue
		}
		for _, m := range found {
			m.Cluster = "HostedCluster " + key
			mounts = append(mounts, m)
		}
	}
	return mounts, unseen
}

// hostedClient is a client of the hosted cluster namespace/name, from its admin kubeconfig.
func hostedClient(ctx context.Context, dyn dynamic.Interface, namespace, name string) (kubernetes.Interface, error) {
	hc, err := dyn.Resource(HostedClusterGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading HostedCluster %s/%s: %w", namespace, name, err)
	}
	secret, _, _ := unstructured.NestedString(hc.Object, "status", "kubeconfig", "name")
	if secret == "" {
		return nil, fmt.Errorf("HostedCluster %s/%s has no status.kubeconfig yet (its API is not published)", namespace, name)
	}
	s, err := dyn.Resource(secretGVR).Namespace(namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s (the kubeconfig of HostedCluster %s): %w", namespace, secret, name, err)
	}
	encoded, _, _ := unstructured.NestedString(s.Object, "data", "kubeconfig")
	data, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(data) == 0 {
		return nil, fmt.Errorf("Secret %s/%s has no kubeconfig key (expected the kubeconfig of HostedCluster %s)", namespace, secret, name)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		// The parser's message may quote the file: only say that it does not parse.
		return nil, fmt.Errorf("the kubeconfig in Secret %s/%s does not parse as a kubeconfig", namespace, secret)
	}
	cfg.Timeout = hostedTimeout
	cfg.UserAgent = "manila-setup"
	return kubernetes.NewForConfig(cfg)
}
