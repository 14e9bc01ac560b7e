// Package launcher holds singularity, the site's stand-in for singularity and apptainer: a
// bash script the harness installs on the batch job's PATH under both names. Its exec runs a
// container's command as this machine's own program, its run a stand-in for the entrypoint of
// the images it knows, with the binds singularity would make (--bind, SINGULARITY_BIND,
// APPTAINER_BIND) as bind mounts in a private mount namespace of an unprivileged user
// namespace, as the invoking user. The package's test runs it for real as unprivileged users.
package launcher
