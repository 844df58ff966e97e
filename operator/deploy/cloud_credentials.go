package deploy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
)

// CredentialsPlan is where the operator's credentials come from, in this order: none are
// written when asked not to; a cloud of clouds.yaml, named, becomes the credentials Secret;
// else, on OpenShift, a CredentialsRequest, which the cloud-credential operator fulfils with the
// cluster's own credentials (the OpenShift way); else there is no source.
type CredentialsPlan int

const (
	// CredentialsNone: no credentials Secret is written.
	CredentialsNone CredentialsPlan = iota
	// CredentialsCloudsYAML: the Secret is made from a cloud of clouds.yaml
	// (CredentialsFromCloudsYAML).
	CredentialsCloudsYAML
	// CredentialsCCO: a CredentialsRequest asks the cloud-credential operator for them.
	CredentialsCCO
)

// ErrNoCredentialsSource is returned by PlanCredentials when no cloud of clouds.yaml is named
// and the cluster has no cloud-credential operator to provide the credentials.
var ErrNoCredentialsSource = errors.New("no source of cloud credentials: no cloud of clouds.yaml is named and the cluster has no cloud-credential operator")

// PlanCredentials chooses where the credentials come from: none (noCredentials), the cloud of
// clouds.yaml named cloud, else the cloud-credential operator when the cluster runs one
// (hasCCO, asked only then; its error is returned as it is), else ErrNoCredentialsSource.
func PlanCredentials(noCredentials bool, cloud string, hasCCO func() (bool, error)) (CredentialsPlan, error) {
	switch {
	case noCredentials:
		return CredentialsNone, nil
	case cloud != "":
		return CredentialsCloudsYAML, nil
	}
	cco, err := hasCCO()
	if err != nil {
		return CredentialsNone, err
	}
	if !cco {
		return CredentialsNone, ErrNoCredentialsSource
	}
	return CredentialsCCO, nil
}

// InvalidCloudError is a clouds.yaml that cannot give the credentials: the cloud is not in it,
// the file cannot be parsed, or the cloud's credentials are not usable.
type InvalidCloudError struct{ Err error }

func (e *InvalidCloudError) Error() string { return e.Err.Error() }
func (e *InvalidCloudError) Unwrap() error { return e.Err }

// CredentialsFromCloudsYAML extracts one cloud as clouds.yaml with a single cloud "openstack",
// and the CA file and the client certificate and key it names, as the data of the credentials
// Secret. clouds.yaml is found and read
// as every command reads it (internal/openstack: the same search, secure.yaml merged). A file
// that cannot be found or read returns its error (fs.ErrNotExist, fs.ErrPermission); a file or
// cloud that does not give usable credentials an *InvalidCloudError.
func CredentialsFromCloudsYAML(ctx context.Context, path, cloud string) (map[string][]byte, error) {
	c, err := openstack.ReadCloud(ctx, openstack.Config{CloudsFile: path, Cloud: cloud})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, err
		}
		return nil, &InvalidCloudError{Err: err}
	}
	out, err := c.Marshal(operator.DefaultCloudName)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{operator.CredentialsKey: out}
	if len(c.CACert) > 0 {
		data[operator.CredentialsCAKey] = c.CACert
	}
	if len(c.ClientCert) > 0 {
		data[operator.CredentialsClientCertKey], data[operator.CredentialsClientKeyKey] = c.ClientCert, c.ClientKey
	}
	creds, err := operator.ParseCredentials(out, operator.DefaultCloudName, c.CACert)
	if err == nil {
		err = creds.SetClientCertificate(c.ClientCert, c.ClientKey)
	}
	if err != nil {
		return nil, &InvalidCloudError{Err: fmt.Errorf("cloud %q in %s: %v", c.Name, c.Source, err)}
	}
	return data, nil
}
