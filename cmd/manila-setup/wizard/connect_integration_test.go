//go:build integration

package wizard

import (
	"context"
	"time"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	operatorclient "github.com/openshift/client-go/operator/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// testBackend is NewLiveBackend with connections made as the command makes them, from cfg's
// clouds.yaml and kubeconfig: the command's own (networks attach) are in package main, which
// these tests cannot import.
func testBackend(cfg LiveConfig) *LiveBackend {
	cfg.ConnectCloud = func(ctx context.Context, cloud string) (*openstack.Client, error) {
		return openstack.Connect(ctx, openstack.Config{Cloud: cloud, CloudsFile: cfg.CloudsFile, UserAgent: cfg.UserAgent})
	}
	cfg.ConnectCluster = func(ctx context.Context, kubeContext string) (ClusterClients, error) {
		rc, err := kubeconfig.RESTConfig(ctx, kubeconfig.Options{Path: cfg.Kubeconfig, Context: kubeContext, UserAgent: cfg.UserAgent, Timeout: 30 * time.Second})
		if err != nil {
			return ClusterClients{}, err
		}
		c := ClusterClients{Host: rc.Host}
		if c.Machines, err = machineclient.NewForConfig(rc); err != nil {
			return c, err
		}
		if c.Kube, err = kubernetes.NewForConfig(rc); err != nil {
			return c, err
		}
		if c.Operator, err = operatorclient.NewForConfig(rc); err != nil {
			return c, err
		}
		c.Dynamic, err = dynamic.NewForConfig(rc)
		return c, err
	}
	return NewLiveBackend(cfg)
}
