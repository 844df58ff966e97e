// Package openstack is manila-setup's careful access to an OpenStack cloud: authentication from
// clouds.yaml (a file or bytes), Neutron (networks, subnets, security groups, ports), Manila
// (share types, share networks, shares and their export locations) and discovery of the network
// Manila exports on.
//
// One Client per process: Connect authenticates once and every call reuses that token;
// gophercloud re-authenticates only when a service answers 401. Every call takes a context and
// every HTTP request is bounded by Config.Timeout. Errors are *Error: one plain sentence with
// the fix, a Kind to branch on, and never a password, token or application-credential secret.
//
// Files: auth.go (clouds.yaml, TLS, Connect), transport.go (HTTP, proxies, request log),
// errors.go (what users read), paging.go (Neutron and Manila pagination), neutron.go, manila.go,
// exports.go (export paths to addresses), rank.go (ranking candidates), rules.go (security
// group analysis), attach.go (servers' ports, without Nova), discover.go (putting it together).
package openstack
