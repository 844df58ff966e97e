package capireal

import "github.com/manila-setup/manila-setup/test/testenv/nodeboot"

// ProviderIDPrefix is how CAPO names a server in a Machine's and a Node's spec.providerID.
const ProviderIDPrefix = nodeboot.ProviderIDPrefix
