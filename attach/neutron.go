package attach

import (
	"context"

	"github.com/manila-setup/manila-setup/internal/neutronid"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// NeutronChecker is the IDChecker of `--os-cloud`: it looks the IDs up with internal/openstack
// (one request per kind for up to 50 IDs, plus one to say what a wrong ID is instead).
type NeutronChecker struct {
	Client *openstack.Client
}

// CheckNetworks returns an *UnknownIDsError for the IDs that are not networks of the project.
func (n NeutronChecker) CheckNetworks(ctx context.Context, ids []string) error {
	nets, err := n.Client.Networks(ctx, ids...)
	if err != nil {
		return err
	}
	found := make([]string, len(nets))
	for i, net := range nets {
		found[i] = net.ID
	}
	return n.missing(ctx, "network", ids, found)
}

// CheckSecurityGroups returns an *UnknownIDsError for the IDs that are not security groups the
// project can use.
func (n NeutronChecker) CheckSecurityGroups(ctx context.Context, ids []string) error {
	sgs, err := n.Client.SecurityGroups(ctx, ids...)
	if err != nil {
		return err
	}
	found := make([]string, len(sgs))
	for i, sg := range sgs {
		found[i] = sg.ID
	}
	return n.missing(ctx, "security group", ids, found)
}

func (n NeutronChecker) missing(ctx context.Context, what string, ids, found []string) error {
	var missing []string
	for _, id := range ids {
		if !ContainsID(found, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e := &UnknownIDsError{What: what, IDs: missing, Actually: map[string]string{}}
	if kinds, err := n.Client.Identify(ctx, lower(missing)...); err == nil {
		for _, id := range missing {
			if k, ok := kinds[neutronid.Key(id)]; ok {
				e.Actually[id] = string(k)
			}
		}
	}
	return e
}

func lower(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = neutronid.Key(id)
	}
	return out
}
