package openstack

import (
	"net/netip"
	"net/url"
	"strings"
)

// ExportHosts returns the hosts an export path is served from. Manila's paths look like
//
//	10.0.0.10:/share_abc                       NFS
//	[fd00:5::10]:/share_abc                    NFS over IPv6
//	10.0.0.1:6789,10.0.0.2:6789:/volumes/x     CephFS (monitor list)
//	\\10.0.0.10\share_abc                      CIFS
//	nfs.example.com:/share                     a host name
//
// Addresses come back as addrs; host names, which this package does not resolve, as names.
func ExportHosts(path string) (addrs []netip.Addr, names []string) {
	path = strings.TrimSpace(path)
	var hostPart string
	switch {
	case strings.HasPrefix(path, `\\`), strings.HasPrefix(path, "//"):
		rest := path[2:]
		end := strings.IndexAny(rest, `\/`)
		if end < 0 {
			end = len(rest)
		}
		hostPart = rest[:end]
	case strings.Contains(path, "://"):
		if u, err := url.Parse(path); err == nil {
			hostPart = u.Host
		}
	default:
		hostPart = path
		if i := strings.Index(path, ":/"); i >= 0 {
			hostPart = path[:i]
		}
	}
	for _, h := range strings.Split(hostPart, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if a, ok := parseHost(h); ok {
			addrs = append(addrs, a)
		} else if name := hostName(h); name != "" {
			names = append(names, name)
		}
	}
	return addrs, names
}

// parseHost accepts "10.0.0.1", "10.0.0.1:6789", "fd00::1", "[fd00::1]", "[fd00::1]:6789".
func parseHost(h string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		if a, err := netip.ParseAddr(h[1 : len(h)-1]); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// hostName returns the host of "name" or "name:port" if it looks like a DNS name.
func hostName(h string) string {
	if i := strings.LastIndex(h, ":"); i >= 0 {
		h = h[:i]
	}
	if h == "" || strings.ContainsAny(h, "[]/\\ ") {
		return ""
	}
	return strings.ToLower(h)
}
