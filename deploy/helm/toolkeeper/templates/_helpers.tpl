{{- define "toolkeeper.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "toolkeeper.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "toolkeeper.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "toolkeeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "toolkeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolkeeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "toolkeeper.serviceAccountName" -}}
{{- default (include "toolkeeper.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "toolkeeper.secretName" -}}
{{- default (printf "%s-keys" (include "toolkeeper.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "toolkeeper.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* toolkeeper.yaml: the values' config, plus the vault backend's secrets section */}}
{{- define "toolkeeper.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if eq .Values.secrets.backend "vault" -}}
{{- $vault := dict "url" (required "vault.address is required with secrets.backend vault" .Values.vault.address) "auth" .Values.vault.auth "mount" .Values.vault.mount "path_prefix" .Values.vault.pathPrefix "verify" .Values.vault.verify -}}
{{- if .Values.vault.namespace -}}{{- $_ := set $vault "namespace" .Values.vault.namespace -}}{{- end -}}
{{- $_ := set $cfg "secrets" (dict "backend" "vault" "vault" $vault) -}}
{{- end -}}
{{- if and $cfg (not (hasKey $cfg "version")) -}}{{- $_ := set $cfg "version" 1 -}}{{- end -}}
{{- if $cfg -}}{{- toYaml $cfg -}}{{- end -}}
{{- end -}}

{{/* The environment every toolkeeper container gets (server and migration Job). The keys
come from a Secret as variables: the server refuses a key file that group or others can
read, which a Secret volume shared through fsGroup always is. */}}
{{- define "toolkeeper.env" -}}
- name: TOOLKEEPER_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "toolkeeper.secretName" . }}
      key: database-url
- name: TOOLKEEPER_AUDIT_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "toolkeeper.secretName" . }}
      key: audit-key
- name: TOOLKEEPER_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "toolkeeper.secretName" . }}
      key: redis-url
      optional: true
- name: TOOLKEEPER_SECRETS_BACKEND
  value: {{ .Values.secrets.backend | quote }}
{{- if eq .Values.secrets.backend "embedded" }}
- name: TOOLKEEPER_SECRETS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "toolkeeper.secretName" . }}
      key: secrets-key
{{- else if eq .Values.secrets.backend "vault" }}
{{- if eq .Values.vault.auth "token" }}
- name: TOOLKEEPER_VAULT_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "toolkeeper.secretName" . }}
      key: vault-token
{{- else }}
- name: TOOLKEEPER_VAULT_ROLE_ID
  valueFrom:
    secretKeyRef:
      name: {{ include "toolkeeper.secretName" . }}
      key: vault-role-id
- name: TOOLKEEPER_VAULT_SECRET_ID
  valueFrom:
    secretKeyRef:
      name: {{ include "toolkeeper.secretName" . }}
      key: vault-secret-id
{{- end }}
{{- else }}
{{- fail "secrets.backend must be embedded or vault" }}
{{- end }}
{{- if include "toolkeeper.config" . }}
- name: TOOLKEEPER_CONFIG
  value: /etc/toolkeeper/toolkeeper.yaml
{{- end }}
{{- end -}}
