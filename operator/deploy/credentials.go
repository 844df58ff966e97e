package deploy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/operator"
)

// CCOAnnotation is what OpenShift's cloud-credential operator puts on the Secrets it writes.
const CCOAnnotation = "cloudcredential.openshift.io/credentials-request"

// HasCloudCredentialOperator tells whether the cluster serves CredentialsRequests, that is runs
// OpenShift's cloud-credential operator, which then writes the operator's credentials Secret
// from the cluster's own cloud credentials.
func HasCloudCredentialOperator(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion("cloudcredential.openshift.io/v1")
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("asking the API server for CredentialsRequests: %w", err)
	}
	for _, r := range list.APIResources {
		if r.Name == "credentialsrequests" {
			return true, nil
		}
	}
	return false, nil
}

// CredentialsSource says where the credentials Secret came from, from the Secret alone (nil:
// it does not exist). Never a value of it.
func CredentialsSource(s *corev1.Secret) string {
	switch {
	case s == nil:
		return fmt.Sprintf("missing: no Secret %s; run `manila-setup operator install --os-cloud NAME`, or create a CredentialsRequest for it", operator.CredentialsSecretName)
	case s.Annotations[CCOAnnotation] != "":
		return fmt.Sprintf("the cloud-credential operator (CredentialsRequest %s)", s.Annotations[CCOAnnotation])
	case s.Labels[operator.LabelManagedBy] == "manila-setup":
		return "clouds.yaml, stored by `manila-setup operator install --os-cloud`"
	}
	return fmt.Sprintf("Secret %s/%s, made by hand or by another tool", s.Namespace, s.Name)
}

// getSecret returns the Secret, nil when it does not exist.
func getSecret(ctx context.Context, get func(context.Context, string) (*corev1.Secret, error), name string) (*corev1.Secret, error) {
	s, err := get(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}
