package openstack

import (
	"context"
	"fmt"
	"slices"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/catalog"
)

// CatalogHas reads the service catalog again with the client's current token (GET
// /v3/auth/catalog: no new token) and reports whether it lists one of the service types for
// the client's region and interface. Unlike HasService, which answers from the catalog of the
// token, it notices a service added to or removed from the catalog since the client connected.
// One request. Errors are *Error.
func (c *Client) CatalogHas(ctx context.Context, types ...string) (bool, error) {
	// The catalog is read from the auth_url of clouds.yaml, which is known to be reachable,
	// rather than from the identity endpoint the catalog itself announces.
	identity := &gophercloud.ServiceClient{ProviderClient: c.provider, Endpoint: c.provider.IdentityBase + "v3/", Type: "identity"}
	pages, err := catalog.List(identity).AllPages(ctx)
	if err != nil {
		return false, c.explain(call{service: "Keystone", what: "reading the Keystone catalog"}, err)
	}
	entries, err := catalog.ExtractServiceCatalog(pages)
	if err != nil {
		return false, &Error{Kind: KindServer, Service: "Keystone", Message: fmt.Sprintf("reading the Keystone catalog: the answer of %s could not be read", c.authURL), err: err}
	}
	for _, e := range entries {
		if !slices.Contains(types, e.Type) {
			continue
		}
		for _, ep := range e.Endpoints {
			if ep.Interface != string(c.iface) {
				continue
			}
			if c.region != "" && ep.Region != c.region && ep.RegionID != c.region {
				continue
			}
			return true, nil
		}
	}
	return false, nil
}
