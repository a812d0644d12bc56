/* The group and version of the product's resources (Sandbox, SandboxClaim,
 * SandboxWarmPool; crd/ defines them), written once for every apiVersion,
 * ownerReference and API path the controller builds. */
#ifndef SBX_SANDBOX_API_H
#define SBX_SANDBOX_API_H

#define SBX_API "sandbox.dev/v1alpha1"

#endif
