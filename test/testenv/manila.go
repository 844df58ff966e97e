package testenv

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
)

// ManilaClient is a Manila v2 client acting as the given cloud of clouds.yaml
// ($OS_CLIENT_CONFIG_FILE), for checking what the driver did.
func ManilaClient(ctx context.Context, cloud string) (*gophercloud.ServiceClient, error) {
	return ManilaClientOf(ctx, "", cloud)
}

// ManilaClientOf is ManilaClient for a cloud of the clouds.yaml at cloudsFile (a project of a
// test's own); "" is $OS_CLIENT_CONFIG_FILE.
func ManilaClientOf(ctx context.Context, cloudsFile, cloud string) (*gophercloud.ServiceClient, error) {
	opts := []clouds.ParseOption{clouds.WithCloudName(cloud)}
	if cloudsFile != "" {
		opts = append(opts, clouds.WithLocations(cloudsFile))
	}
	ao, eo, tlsConfig, err := clouds.Parse(opts...)
	if err != nil {
		return nil, fmt.Errorf("clouds.yaml, cloud %s: %w", cloud, err)
	}
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, fmt.Errorf("authenticating as %s: %w", cloud, err)
	}
	c, err := openstack.NewSharedFileSystemV2(pc, eo)
	if err != nil {
		return nil, fmt.Errorf("no Manila in the catalog: %w", err)
	}
	c.Microversion = "2.65"
	return c, nil
}
