package testenv

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlatformOptions shape the stand-in for OpenShift's own storage stack.
type PlatformOptions struct {
	// StorageCapabilityDisabled leaves "Storage" out of ClusterVersion's enabled capabilities;
	// the cluster-storage-operator then runs no CSI driver operator, so none of its Manila
	// objects are created either.
	StorageCapabilityDisabled bool
	// ManilaPending lists the Manila ClusterCSIDriver among the storage ClusterOperator's related
	// objects without creating the objects yet (CSO has just started).
	ManilaPending bool
}

// Who writes what on a real OpenShift-on-OpenStack cluster: the field managers recorded in
// managedFields are the writers' user agents.
const (
	managerCVO = "cluster-version-operator"
	managerCSO = "cluster-storage-operator"
	managerCCO = "cloud-credential-operator"
	// The platform's Manila CSI driver operator (run by CSO), writing its operands.
	managerPlatformManila = "csi-operator"
)

// InstallPlatform makes the cluster look like OpenShift on OpenStack with its Storage capability:
// ClusterVersion "version" (capabilities), the storage ClusterOperator, and, as
// cluster-storage-operator creates them, the platform's Manila CSI driver operator: namespace
// openshift-cluster-csi-drivers, its Deployment manila-csi-driver-operator (and ServiceAccount),
// the ClusterCSIDriver manila.csi.openstack.org, and the cloud-credential operator's Secret
// manila-cloud-credentials, and what that operator deploys (namespace
// openshift-manila-csi-driver, Secret csi-manila-secrets, the CSIDriver, StorageClass
// csi-manila-default). Every object is written with the field manager of the component that
// writes it on a real cluster, so that who-owns-what reads as it would there. The
// platform's operator itself does not run: its Deployment keeps 0 replicas.
func InstallPlatform(ctx context.Context, cfg *rest.Config, opts PlatformOptions) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	capabilities := `["baremetal", "Console", "Insights", "Storage", "CSISnapshot", "MachineAPI"]`
	if opts.StorageCapabilityDisabled {
		capabilities = `["baremetal", "Console", "Insights", "MachineAPI"]`
	}
	related := `[{"group": "", "resource": "namespaces", "name": "openshift-cluster-storage-operator"}]`
	if !opts.StorageCapabilityDisabled {
		related = `[{"group": "", "resource": "namespaces", "name": "openshift-cluster-storage-operator"},
		  {"group": "operator.openshift.io", "resource": "clustercsidrivers", "name": "manila.csi.openstack.org"},
		  {"group": "operator.openshift.io", "resource": "clustercsidrivers", "name": "cinder.csi.openstack.org"}]`
	}
	steps := []struct {
		manager, status string
		yaml            string
	}{
		{managerCVO, `{"desired": {"version": "4.20.0", "image": "quay.io/openshift-release-dev/ocp-release@sha256:5e8f2a1c4b7d0e3f6a9c2b5d8e1f4a7c0b3d6e9f2a5c8b1d4e7f0a3c6b9d2e5f"}, "observedGeneration": 1, "versionHash": "x", "availableUpdates": null,
		  "capabilities": {"enabledCapabilities": ` + capabilities + `, "knownCapabilities": ["baremetal", "Console", "Insights", "Storage", "CSISnapshot", "MachineAPI"]}}`,
			`apiVersion: config.openshift.io/v1
kind: ClusterVersion
metadata: {name: version}
spec: {clusterID: 6b8f7c2e-1f0a-4d2b-9c5e-3a7d8e9f0b1c, channel: stable-4.20}`},
		{managerCVO, `{"relatedObjects": ` + related + `}`,
			`apiVersion: config.openshift.io/v1
kind: ClusterOperator
metadata: {name: storage}
spec: {}`},
		// Where CredentialsRequests live; the cloud-credential operator's own capability.
		{managerCVO, "", `apiVersion: v1
kind: Namespace
metadata: {name: openshift-cloud-credential-operator}`},
	}
	if !opts.StorageCapabilityDisabled && !opts.ManilaPending {
		steps = append(steps, []struct {
			manager, status string
			yaml            string
		}{
			{managerCVO, "", `apiVersion: v1
kind: Namespace
metadata:
  name: openshift-cluster-csi-drivers
  annotations: {workload.openshift.io/allowed: management}
  labels: {openshift.io/cluster-monitoring: "true"}`},
			{managerCSO, `{"conditions": [
			    {"type": "ManilaDriverControllerServiceControllerAvailable", "status": "True", "reason": "AsExpected", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			    {"type": "ManilaDriverControllerServiceControllerDegraded", "status": "False", "reason": "AsExpected", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			    {"type": "ManilaDriverNodeServiceControllerAvailable", "status": "True", "reason": "AsExpected", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}`,
				`apiVersion: operator.openshift.io/v1
kind: ClusterCSIDriver
metadata:
  name: manila.csi.openstack.org
  annotations: {release.openshift.io/create-only: "true"}
spec: {managementState: Managed, logLevel: Normal, operatorLogLevel: Normal}`},
			// What the platform's Manila operator deploys: its driver's namespace, the secret
			// its StorageClasses name, the CSIDriver and one unrestricted StorageClass per share
			// type (csi-manila-<type>, no nfs-shareClient).
			{managerPlatformManila, "", `apiVersion: v1
kind: Namespace
metadata: {name: openshift-manila-csi-driver}`},
			{managerPlatformManila, "", `apiVersion: v1
kind: Secret
metadata: {name: csi-manila-secrets, namespace: openshift-manila-csi-driver}
stringData: {os-authURL: "https://keystone.invalid:5000/v3"}`},
			{managerPlatformManila, "", `apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: manila.csi.openstack.org}
spec: {attachRequired: false, podInfoOnMount: false, fsGroupPolicy: None}`},
			{managerPlatformManila, "", `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: csi-manila-default}
provisioner: manila.csi.openstack.org
parameters:
  type: default
  csi.storage.k8s.io/provisioner-secret-name: csi-manila-secrets
  csi.storage.k8s.io/provisioner-secret-namespace: openshift-manila-csi-driver
  csi.storage.k8s.io/node-stage-secret-name: csi-manila-secrets
  csi.storage.k8s.io/node-stage-secret-namespace: openshift-manila-csi-driver
  csi.storage.k8s.io/node-publish-secret-name: csi-manila-secrets
  csi.storage.k8s.io/node-publish-secret-namespace: openshift-manila-csi-driver`},
			{managerCSO, "", `apiVersion: v1
kind: ServiceAccount
metadata: {name: manila-csi-driver-operator, namespace: openshift-cluster-csi-drivers}`},
			{managerCSO, "", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: manila-csi-driver-operator
  namespace: openshift-cluster-csi-drivers
  annotations: {config.openshift.io/inject-proxy: manila-csi-driver-operator}
spec:
  replicas: 0
  selector: {matchLabels: {name: manila-csi-driver-operator}}
  template:
    metadata:
      labels: {name: manila-csi-driver-operator}
      annotations: {target.workload.openshift.io/management: '{"effect": "PreferredDuringScheduling"}'}
    spec:
      serviceAccountName: manila-csi-driver-operator
      priorityClassName: system-cluster-critical
      containers:
      - name: manila-csi-driver-operator
        image: quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0c4f2f4a8e3b1d6c9e7a5b2f8d1c3e6a9b4d7f0e2c5a8b1d4e7f0a3c6b9d2e5f
        args: [start, -v=2]
        env: [{name: DRIVER_IMAGE, value: quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1d5e3f6a9c2b8e1d4f7a0c3e6b9d2f5a8c1e4b7d0f3a6c9e2b5d8f1a4c7e0b3d}]`},
			{managerCCO, "", `apiVersion: v1
kind: Secret
metadata:
  name: manila-cloud-credentials
  namespace: openshift-cluster-csi-drivers
  annotations: {cloudcredential.openshift.io/credentials-request: openshift-cloud-credential-operator/openshift-manila-csi-driver}
stringData: {clouds.yaml: "clouds: {openstack: {auth: {auth_url: 'https://keystone.invalid:5000'}}}"}`},
		}...)
	}
	for _, s := range steps {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(s.yaml), &u.Object); err != nil {
			return fmt.Errorf("platform stand-in: %w", err)
		}
		gvk := u.GroupVersionKind()
		res := dyn.Resource(schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resourceOf(gvk.Kind)})
		var ri dynamic.ResourceInterface = res
		if ns := u.GetNamespace(); ns != "" {
			ri = res.Namespace(ns)
		}
		created, err := ri.Create(ctx, u, metav1.CreateOptions{FieldManager: s.manager})
		if err != nil {
			return fmt.Errorf("platform stand-in: creating %s %s: %w", gvk.Kind, u.GetName(), err)
		}
		if s.status != "" {
			var status map[string]any
			if err := yaml.Unmarshal([]byte(s.status), &status); err != nil {
				return fmt.Errorf("platform stand-in: %w", err)
			}
			created.Object["status"] = status
			if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: s.manager}); err != nil {
				return fmt.Errorf("platform stand-in: status of %s %s: %w", gvk.Kind, u.GetName(), err)
			}
		}
	}
	return nil
}

func resourceOf(kind string) string {
	switch kind {
	case "ClusterVersion":
		return "clusterversions"
	case "ClusterOperator":
		return "clusteroperators"
	case "Namespace":
		return "namespaces"
	case "ClusterCSIDriver":
		return "clustercsidrivers"
	case "ServiceAccount":
		return "serviceaccounts"
	case "Deployment":
		return "deployments"
	case "Secret":
		return "secrets"
	case "StorageClass":
		return "storageclasses"
	case "CSIDriver":
		return "csidrivers"
	}
	panic("platform stand-in: no resource for kind " + kind)
}

var credentialsRequestGVR = schema.GroupVersionResource{Group: "cloudcredential.openshift.io", Version: "v1", Resource: "credentialsrequests"}

// FulfilCredentialsRequests plays OpenShift's cloud-credential operator in passthrough mode,
// once: for every OpenStack CredentialsRequest without its Secret it writes the Secret the
// request names, with the cluster's clouds.yaml (cloud "openstack") under key clouds.yaml, as
// that operator does, and marks the request provisioned. It returns the Secrets it wrote, as
// "namespace/name".
func FulfilCredentialsRequests(ctx context.Context, cfg *rest.Config, cloudsYAML []byte) ([]string, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := dyn.Resource(credentialsRequestGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cloud-credential stand-in: listing CredentialsRequests: %w", err)
	}
	secrets := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"})
	var wrote []string
	for i := range list.Items {
		cr := &list.Items[i]
		if kind, _, _ := unstructured.NestedString(cr.Object, "spec", "providerSpec", "kind"); kind != "OpenStackProviderSpec" {
			continue
		}
		ref, _, _ := unstructured.NestedStringMap(cr.Object, "spec", "secretRef")
		secret := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": ref["name"], "namespace": ref["namespace"],
				"annotations": map[string]any{"cloudcredential.openshift.io/credentials-request": cr.GetNamespace() + "/" + cr.GetName()}},
			"data": map[string]any{"clouds.yaml": cloudsYAML},
		}}
		if _, err := secrets.Namespace(ref["namespace"]).Create(ctx, secret, metav1.CreateOptions{FieldManager: managerCCO}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return wrote, fmt.Errorf("cloud-credential stand-in: Secret %s/%s: %w", ref["namespace"], ref["name"], err)
		}
		wrote = append(wrote, ref["namespace"]+"/"+ref["name"])
		cr.Object["status"] = map[string]any{"provisioned": true, "lastSyncGeneration": cr.GetGeneration()}
		if _, err := dyn.Resource(credentialsRequestGVR).Namespace(cr.GetNamespace()).UpdateStatus(ctx, cr, metav1.UpdateOptions{FieldManager: managerCCO}); err != nil {
			return wrote, fmt.Errorf("cloud-credential stand-in: status of %s: %w", cr.GetName(), err)
		}
	}
	return wrote, nil
}
