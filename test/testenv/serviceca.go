package testenv

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
)

// servingCertAnnotation asks OpenShift's service-ca operator for a serving certificate of the
// Service, in a Secret of that name.
const servingCertAnnotation = "service.beta.openshift.io/serving-cert-secret-name"

// FulfilServingCertSecrets plays OpenShift's service-ca operator, once: for every Service of
// namespace that asks for a serving certificate and has no Secret yet, it writes the
// kubernetes.io/tls Secret named in the annotation, for the Service's DNS names, as that operator
// does (a pod mounting it does not start before). It returns the Secrets it wrote.
func FulfilServingCertSecrets(ctx context.Context, kc kubernetes.Interface, namespace string) ([]string, error) {
	services, err := kc.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("service-ca stand-in: listing Services: %w", err)
	}
	var wrote []string
	for _, svc := range services.Items {
		name := svc.Annotations[servingCertAnnotation]
		if name == "" {
			continue
		}
		if _, err := kc.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			continue
		}
		host := svc.Name + "." + namespace + ".svc"
		crt, key, err := certutil.GenerateSelfSignedCertKey(host, []net.IP{}, []string{host + ".cluster.local"})
		if err != nil {
			return wrote, err
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Annotations: map[string]string{"service.beta.openshift.io/originating-service-name": svc.Name}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
		}
		if _, err := kc.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: "service-ca-operator"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return wrote, fmt.Errorf("service-ca stand-in: Secret %s/%s: %w", namespace, name, err)
		}
		wrote = append(wrote, namespace+"/"+name)
	}
	return wrote, nil
}
