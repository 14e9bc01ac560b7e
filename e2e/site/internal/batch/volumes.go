package batch

import (
	"fmt"
	"io/fs"
	"path"

	corev1 "k8s.io/api/core/v1"
)

// volumes materialises the pod's volumes as files of the job directory, one directory per
// volume under volumes/, bound whole at each mount (as the kubelet mounts a volume). A file is
// readable and writable by the account only, and executable when its mode asks for it (a
// script in a ConfigMap).
func (r *renderer) volumes() error {
	r.volumeDirs = map[string]volumeDir{}
	for _, v := range r.in.Pod.Spec.Volumes {
		if !dnsLabel.MatchString(v.Name) {
			return refusef("volume name %q is not a DNS label", v.Name)
		}
		dir := path.Join("volumes", v.Name)
		source := path.Join(r.in.JobDir, dir)
		switch {
		case v.EmptyDir != nil:
			r.add(File{Path: dir, Dir: true, Mode: 0o700})
			r.volumeDirs[v.Name] = volumeDir{source: source}
		case v.HostPath != nil:
			if !path.IsAbs(v.HostPath.Path) {
				return refusef("volume %s: hostPath %q is not absolute", v.Name, v.HostPath.Path)
			}
			r.volumeDirs[v.Name] = volumeDir{source: path.Clean(v.HostPath.Path)}
		case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
			files, skip, err := r.projection(v)
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if skip != "" {
				r.note("volume %s is not mounted: %s", v.Name, skip)
				continue
			}
			r.add(File{Path: dir, Dir: true, Mode: 0o700})
			for _, f := range files {
				f.Path = path.Join(dir, f.Path)
				r.add(f)
			}
			r.volumeDirs[v.Name] = volumeDir{source: source, readOnly: true}
		default:
			return refusef("volume %s: the site materialises only emptyDir, hostPath, configMap, secret, downwardAPI and projected volumes", v.Name)
		}
	}
	return nil
}

// projection is the files of a ConfigMap, Secret, downward API or projected volume; skip says
// why the volume is left out (a service account token, which the site does not issue).
func (r *renderer) projection(v corev1.Volume) (files []File, skip string, err error) {
	switch {
	case v.ConfigMap != nil:
		files, err = r.configMapFiles(v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode))
	case v.Secret != nil:
		files, err = r.secretFiles(v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode))
	case v.DownwardAPI != nil:
		files, err = r.downwardFiles(v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode))
	case v.Projected != nil:
		defaultMode := mode(v.Projected.DefaultMode)
		for _, src := range v.Projected.Sources {
			var more []File
			switch {
			case src.ServiceAccountToken != nil:
				return nil, "it projects a service account token, which this site does not issue (set automountServiceAccountToken: false to leave it out)", nil
			case src.ConfigMap != nil:
				more, err = r.configMapFiles(src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, defaultMode)
			case src.Secret != nil:
				more, err = r.secretFiles(src.Secret.Name, src.Secret.Items, src.Secret.Optional, defaultMode)
			case src.DownwardAPI != nil:
				more, err = r.downwardFiles(src.DownwardAPI.Items, defaultMode)
			default:
				return nil, "it projects a source other than a ConfigMap, Secret or downward API", nil
			}
			if err != nil {
				return nil, "", err
			}
			files = append(files, more...)
		}
	}
	return files, "", err
}

func (r *renderer) configMapFiles(name string, items []corev1.KeyToPath, opt *bool, defaultMode fs.FileMode) ([]File, error) {
	cm, err := optional(r.in.ConfigMap(name))(opt)
	if err != nil || cm == nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles("ConfigMap "+name, data, items, opt, defaultMode)
}

func (r *renderer) secretFiles(name string, items []corev1.KeyToPath, opt *bool, defaultMode fs.FileMode) ([]File, error) {
	secret, err := optional(r.in.Secret(name))(opt)
	if err != nil || secret == nil {
		return nil, err
	}
	return keyFiles("Secret "+name, secret.Data, items, opt, defaultMode)
}

// keyFiles lays out an object's keys as the kubelet does: every key as a file of its name, or
// only the items listed, each at its path.
func keyFiles(what string, data map[string][]byte, items []corev1.KeyToPath, opt *bool, defaultMode fs.FileMode) ([]File, error) {
	if len(items) == 0 {
		files := make([]File, 0, len(data))
		for _, k := range sortedKeys(data) {
			if !fs.ValidPath(k) {
				return nil, refusef("%s: key %q is not a file name", what, k)
			}
			files = append(files, File{Path: k, Mode: defaultMode, Data: data[k]})
		}
		return files, nil
	}
	var files []File
	for _, item := range items {
		v, ok := data[item.Key]
		if !ok {
			if opt != nil && *opt {
				continue
			}
			return nil, fmt.Errorf("%s has no key %s", what, item.Key)
		}
		if !fs.ValidPath(item.Path) {
			return nil, refusef("%s: item path %q leaves the volume", what, item.Path)
		}
		m := defaultMode
		if item.Mode != nil {
			m = mode(item.Mode)
		}
		files = append(files, File{Path: item.Path, Mode: m, Data: v})
	}
	return files, nil
}

func (r *renderer) downwardFiles(items []corev1.DownwardAPIVolumeFile, defaultMode fs.FileMode) ([]File, error) {
	var files []File
	for _, item := range items {
		if item.FieldRef == nil {
			return nil, refusef("downward API item %s: only fieldRef items can be rendered before the job runs", item.Path)
		}
		v, err := r.field(item.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		if !fs.ValidPath(item.Path) {
			return nil, refusef("downward API item path %q leaves the volume", item.Path)
		}
		m := defaultMode
		if item.Mode != nil {
			m = mode(item.Mode)
		}
		files = append(files, File{Path: item.Path, Mode: m, Data: []byte(v)})
	}
	return files, nil
}

// mode is a volume file's mode on the site: the account's read and write, and its execute bit
// when the pod's mode gives the owner one. Group and others get nothing: the job directory is
// the account's alone.
func mode(podMode *int32) fs.FileMode {
	if podMode != nil && *podMode&0o100 != 0 {
		return 0o700
	}
	return 0o600
}
