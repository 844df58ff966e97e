package storagecheck

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// machineAPIObjects lists what the rule of where the workers mount from reads of
// openshift-machine-api (MachineSets, Machines, the ControlPlaneMachineSet cluster) and which
// Nodes run workloads; a resource the cluster does not serve is empty.
func machineAPIObjects(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface) (shareclient.MachineAPI, error) {
	var in shareclient.MachineAPI
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return in, err
	}
	list := func(version, resource string) ([]*unstructured.Unstructured, error) {
		l, err := dyn.Resource(schema.GroupVersionResource{Group: "machine.openshift.io", Version: version, Resource: resource}).
			Namespace("openshift-machine-api").List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %v", resource, err)
		}
		out := make([]*unstructured.Unstructured, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	}
	if in.MachineSets, err = list("v1beta1", "machinesets"); err != nil {
		return in, err
	}
	if in.Machines, err = list("v1beta1", "machines"); err != nil {
		return in, err
	}
	sets, err := list("v1", "controlplanemachinesets")
	if err != nil {
		return in, err
	}
	for _, u := range sets {
		if u.GetName() == "cluster" {
			in.ControlPlane = u
		}
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("listing Nodes: %v", err)
	}
	runs := map[string]bool{}
	for i := range nodes.Items {
		runs[nodes.Items[i].Name] = shareclient.RunsWorkloads(&nodes.Items[i])
	}
	in.RunsWorkloads = func(name string) bool { return runs[name] }
	return in, nil
}
