//go:build integration

package testenv_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// The rendered CredentialsRequest is accepted by a real API server with the cloud-credential
// operator's CRD, and the stand-in turns it into the Secret the operator reads.
func TestCredentialsRequestFulfilled(t *testing.T) {
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	out, err := operator.Render(operator.RenderOptions{Namespace: "ns1", OperatorImage: "example.test/op:1", Images: operator.DefaultImages, CredentialsRequest: true})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := operator.Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"ns1", "openshift-cloud-credential-operator"} {
		if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range objs {
		if u.GetKind() != "CredentialsRequest" {
			continue
		}
		gvr := schema.GroupVersionResource{Group: "cloudcredential.openshift.io", Version: "v1", Resource: "credentialsrequests"}
		if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the rendered CredentialsRequest: %v", err)
		}
	}
	clouds := []byte("clouds:\n  openstack:\n    auth: {auth_url: 'http://127.0.0.1:5000/v3'}\n")
	wrote, err := testenv.FulfilCredentialsRequests(ctx, api.Config, clouds)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 1 || wrote[0] != "ns1/"+operator.CredentialsSecretName {
		t.Fatalf("stand-in wrote %v, want ns1/%s", wrote, operator.CredentialsSecretName)
	}
	s, err := api.Client.CoreV1().Secrets("ns1").Get(ctx, operator.CredentialsSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data[operator.CredentialsKey]) != string(clouds) || len(s.ManagedFields) == 0 || s.ManagedFields[0].Manager != "cloud-credential-operator" {
		t.Errorf("Secret %s: keys %d, managers %+v", s.Name, len(s.Data), s.ManagedFields)
	}
}
