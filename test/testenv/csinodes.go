package testenv

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CSINodeDrivers are the node plugins of the Manila CSI driver as the operator deploys them:
// DaemonSet name → the CSI driver name its pod registers with the kubelet.
var CSINodeDrivers = map[string]string{
	"manila-csi-driver-node":     "manila.csi.openstack.org",
	"manila-csi-driver-nfs-node": "nfs.csi.k8s.io",
}

// RegisterCSIDrivers plays, for kwok nodes, what a kubelet does once a CSI node plugin on it
// registers through its plugin registration socket: the node's CSINode (named as the Node,
// owned by it) lists the driver, with the node's name as its node ID. A real kubelet (the real
// node) does it itself; a kwok node runs no plugin, so without this its CSINode would never
// list the driver, and a check of it would fail where a real cluster's passes. Only the Ready
// pods of the DaemonSets of drivers (in namespace) count, as only a running plugin registers.
func RegisterCSIDrivers(ctx context.Context, kube kubernetes.Interface, namespace string, drivers map[string]string) error {
	for ds, driver := range drivers {
		d, err := kube.AppsV1().DaemonSets(namespace).Get(ctx, ds, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return fmt.Errorf("DaemonSet %s/%s: %w", namespace, ds, err)
		}
		pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || !podReady(&p) {
				continue
			}
			if err := registerOnKwokNode(ctx, kube, p.Spec.NodeName, driver); err != nil {
				return err
			}
		}
	}
	return nil
}

// KeepCSINodes runs RegisterCSIDrivers every interval until ctx ends; a failed round is tried
// again at the next.
func KeepCSINodes(ctx context.Context, kube kubernetes.Interface, namespace string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_ = RegisterCSIDrivers(ctx, kube, namespace, CSINodeDrivers)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func registerOnKwokNode(ctx context.Context, kube kubernetes.Interface, nodeName, driver string) error {
	node, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if node.Annotations["kwok.x-k8s.io/node"] != "fake" {
		return nil // a real kubelet registers its own plugins
	}
	entry := storagev1.CSINodeDriver{Name: driver, NodeID: nodeName}
	cn, err := kube.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cn = &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: nodeName, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID}}},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{entry}},
		}
		_, err = kube.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }) {
		return nil
	}
	cn.Spec.Drivers = append(cn.Spec.Drivers, entry)
	_, err = kube.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{})
	return err
}
