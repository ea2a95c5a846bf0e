// The test suite's identity provider: panva's certified `oidc-provider` (pinned in
// ../package.json), configured here, started by tests/support/idp.py. Not a token minter:
// every token comes out of the provider's own endpoints and models.
//
//   node server.mjs CONFIG.json
//
// CONFIG (written by the fixture; see tests/support/idp.py for the Python side):
//   host, port (0 = ephemeral), ready_file (written once listening: {"port": N}),
//   admin_secret, cookie_keys, jwks {keys: [private JWKs with kid, alg, use]},
//   access_token_ttl_s, refresh_token_ttl_s, id_token_ttl_s,
//   clients [{client_id, client_secret?, grant_types, redirect_uris, ...oidc-provider client
//            metadata, plus our own: claims {extra access-token claims for its client
//            credentials tokens}, subject_audiences [audiences a token exchange accepts in
//            the subject token; absent = any audience this issuer signed], consent (true =
//            show the consent screen; default: first-party, no consent screen)}],
//   users {sub: {name, email, groups, tk_tenant, password? (absent: any password)}},
//   resources {URL: {scope, format: "jwt" | "opaque", alg: "RS256" | "ES256", ttl_s?}}.
//
// Open dynamic client registration (RFC 7591) is on, as MCP clients register themselves.
//
// Admin hook (same listener, loopback only, header `x-admin-secret: <admin_secret>`):
//   POST /admin/keys            {jwks}              replace the signing keys (new provider
//                                                   instance, same storage, same port)
//   POST /admin/clients         {client metadata}   add or replace a client
//   POST /admin/resources       {URL: {scope, ...}} add or replace resources
//   POST /admin/users           {sub: {...}}        add or replace users
//   POST /admin/clients/disable {client_id}         the client no longer exists for the
//                                                   provider (token, refresh, introspection
//                                                   by it are refused) until enabled again
//   POST /admin/clients/enable  {client_id}
//   POST /admin/grants/revoke   {client_id?, sub?}  destroy every matching grant and every
//                                                   token issued under it (refresh tokens,
//                                                   opaque access tokens); answers {revoked: N}
//   POST /admin/tokens/revoke   {token}             destroy one opaque token (any kind)
//   GET  /admin/health
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';

import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

// The packages come from ../node_modules, or from config.node_modules (an ESM import does
// not read NODE_PATH; the fixture passes the directory it found there).
const modules = config.node_modules ?? path.join(import.meta.dirname, '..', 'node_modules');
const load = (name) => import(pathToFileURL(path.join(modules, name)).href);
const { default: Provider, errors } = await load('oidc-provider/lib/index.js');
const { default: MemoryAdapter } = await load('oidc-provider/lib/adapters/memory_adapter.js');
const { default: LRU } = await load('oidc-provider/lib/helpers/lru.js');
const jose = await load('oidc-provider/node_modules/jose/dist/webapi/index.js')
  .catch(() => load('jose/dist/webapi/index.js'));

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TT_ACCESS = 'urn:ietf:params:oauth:token-type:access_token';
const TT_JWT = 'urn:ietf:params:oauth:token-type:jwt';
const TT_ID = 'urn:ietf:params:oauth:token-type:id_token';
const OUR_CLIENT_FIELDS = ['claims', 'subject_audiences', 'consent'];
const MAX_ADMIN_BODY = 64 * 1024;

const users = config.users ?? {};
const resources = config.resources ?? {};
const clients = new Map((config.clients ?? []).map((c) => [c.client_id, c]));
const disabled = new Set();
let jwks = config.jwks;

// One storage for every provider instance this process builds (key rotation swaps the
// instance, not the grants and tokens), with an index of grants for the admin hook.
// (oidc-provider's own memory storage keeps 1,000 entries, which a long module could pass.)
const storage = new LRU({ maxSize: 200000 });
const baseAdapter = (model) => new MemoryAdapter(model, storage, 0);
const grantIndex = new Map(); // grant id -> {clientId, accountId}
const adapters = new Map();
function adapterFor(model) {
  if (!adapters.has(model)) {
    const inner = baseAdapter(model);
    if (model === 'Grant') {
      const upsert = inner.upsert.bind(inner);
      const destroy = inner.destroy.bind(inner);
      inner.upsert = async (id, payload, expiresIn) => {
        grantIndex.set(id, { clientId: payload.clientId, accountId: payload.accountId });
        return upsert(id, payload, expiresIn);
      };
      inner.destroy = async (id) => {
        grantIndex.delete(id);
        return destroy(id);
      };
    }
    adapters.set(model, inner);
  }
  return adapters.get(model);
}

function providerClient(metadata) {
  const out = { ...metadata };
  for (const field of OUR_CLIENT_FIELDS) delete out[field];
  return out;
}

function userClaims(sub) {
  const user = users[sub];
  if (!user) return undefined;
  const { password, ...claims } = user;
  return { ...claims, sub, email_verified: user.email ? true : undefined };
}

// Claims added to access tokens (JWT payload and introspection): the user's groups and
// tenant for tokens of a person, the client's configured claims for client credentials,
// and whatever the grant handler set (token exchange's `act`).
async function extraTokenClaims(ctx, token) {
  const extra = {};
  if (token.accountId && users[token.accountId]) {
    const { groups, tk_tenant: tenant, email } = users[token.accountId];
    Object.assign(extra, { groups, tk_tenant: tenant, email });
  } else if (token.kind === 'ClientCredentials') {
    Object.assign(extra, clients.get(token.clientId)?.claims ?? {});
  }
  Object.assign(extra, token.extra ?? {});
  return Object.keys(extra).length ? extra : undefined;
}

async function getResourceServerInfo(ctx, indicator) {
  const resource = resources[indicator];
  if (!resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
  const info = {
    scope: resource.scope ?? '',
    audience: indicator,
    accessTokenFormat: resource.format ?? 'jwt',
    accessTokenTTL: resource.ttl_s ?? config.access_token_ttl_s,
  };
  if (info.accessTokenFormat === 'jwt') info.jwt = { sign: { alg: resource.alg ?? 'RS256' } };
  return info;
}

// First-party clients: the grant covers whatever is asked (no consent screen) unless the
// client says `consent: true`.
async function loadExistingGrant(ctx) {
  const { oidc } = ctx;
  const grantId = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
  let grant = grantId ? await oidc.provider.Grant.find(grantId) : undefined;
  if (clients.get(oidc.client.clientId)?.consent) return grant;
  grant ||= new oidc.provider.Grant({
    clientId: oidc.client.clientId, accountId: oidc.session.accountId,
  });
  grant.addOIDCScope([...oidc.requestParamOIDCScopes].join(' '));
  grant.addOIDCClaims([...oidc.requestParamClaims]);
  for (const [indicator, server] of Object.entries(oidc.resourceServers)) {
    const wanted = [...oidc.requestParamScopes].filter((s) => server.scopes.has(s));
    grant.addResourceScope(indicator, wanted.join(' '));
  }
  await grant.save();
  return grant;
}

async function verifySubjectToken(provider, value, type, client) {
  const invalid = (why) => new errors.InvalidGrant(`subject_token ${why}`);
  if (![TT_ACCESS, TT_JWT, TT_ID].includes(type)) {
    throw new errors.InvalidRequest('unsupported subject_token_type');
  }
  if (value.split('.').length === 3) {
    const keys = jose.createLocalJWKSet({
      keys: jwks.keys.map(({
        d, p, q, dp, dq, qi, key_ops: ops, ...pub
      }) => pub),
    });
    let verified;
    try {
      verified = await jose.jwtVerify(value, keys, {
        issuer: provider.issuer, algorithms: ['RS256', 'ES256'],
      });
    } catch (err) {
      throw invalid(`does not verify (${err.code ?? err.message})`);
    }
    const { payload, protectedHeader } = verified;
    const isAccess = protectedHeader.typ === 'at+jwt';
    if (type === TT_ACCESS && !isAccess) throw invalid('is not an access token');
    if (type === TT_ID && isAccess) throw invalid('is not an ID token');
    const allowed = clients.get(client.clientId)?.subject_audiences;
    const auds = [].concat(payload.aud ?? []);
    if (allowed && !auds.some((a) => allowed.includes(a))) {
      throw invalid('has an audience this client may not exchange');
    }
    if (!payload.sub) throw invalid('has no sub');
    return { sub: payload.sub, act: payload.act };
  }
  const token = (await provider.AccessToken.find(value))
    ?? (await provider.ClientCredentials.find(value));
  // (revoking a grant destroys the tokens under it, so a found token's grant is there)
  if (!token?.isValid) throw invalid('is not active');
  const allowed = clients.get(client.clientId)?.subject_audiences;
  if (allowed && !allowed.includes(token.aud)) {
    throw invalid('has an audience this client may not exchange');
  }
  return { sub: token.accountId ?? token.clientId, act: token.extra?.act };
}

// RFC 8693 token exchange: an access token for `resource` whose `sub` is the subject's and
// whose `act` names the client that exchanged it (nesting any `act` the subject had).
// `actor_token` and `audience` are accepted and ignored: the actor is the authenticated client.
async function tokenExchange(ctx) {
  const { client, params, provider } = ctx.oidc;
  for (const name of ['subject_token', 'subject_token_type', 'resource']) {
    if (!params[name]) throw new errors.InvalidRequest(`missing required parameter '${name}'`);
  }
  if (params.requested_token_type && params.requested_token_type !== TT_ACCESS) {
    throw new errors.InvalidRequest('only access tokens can be requested');
  }
  const subject = await verifySubjectToken(
    provider, params.subject_token, params.subject_token_type, client,
  );
  const server = new provider.ResourceServer(
    params.resource, await getResourceServerInfo(ctx, params.resource),
  );
  const requested = params.scope ? params.scope.split(' ') : [...server.scopes];
  const refused = requested.filter((s) => !server.scopes.has(s));
  if (refused.length) throw new errors.InvalidScope('requested scope is not allowed', refused.join(' '));
  const scope = requested.filter(Boolean).join(' ') || undefined;

  const grant = new provider.Grant({ accountId: subject.sub, clientId: client.clientId });
  grant.addResourceScope(params.resource, scope ?? '');
  const grantId = await grant.save();
  const token = new provider.AccessToken({
    accountId: subject.sub, client, grantId, gty: 'token_exchange', scope,
  });
  token.resourceServer = server;
  token.extra = {
    act: subject.act ? { sub: client.clientId, act: subject.act } : { sub: client.clientId },
  };
  ctx.oidc.entity('AccessToken', token);
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: TT_ACCESS,
    token_type: 'Bearer',
    expires_in: token.expiration,
    ...(scope ? { scope } : {}),
  };
}

// Pages without anything from outside (the provider's own pull web fonts), with stable
// names for a browser test: input[name=login], input[name=password], button[type=submit].
const esc = (value) => String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
function page(title, body) {
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><h1>${esc(title)}</h1>${body}</main></body></html>`;
}

function loginPage(uid, params, error) {
  return page('Sign in to the test IdP', `
${error ? `<p role="alert" id="error">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
  <input type="hidden" name="prompt" value="login">
  <label>User <input required type="text" name="login" value="${esc(params.login_hint)}"></label>
  <label>Password <input required type="password" name="password"></label>
  <button type="submit">Sign in</button>
</form>
<p><a href="/interaction/${esc(uid)}/abort">Cancel</a></p>`);
}

function consentPage(uid, client, details) {
  const wanted = [...(details.missingOIDCScope ?? []),
    ...Object.values(details.missingResourceScopes ?? {}).flat()];
  return page(`Allow ${client?.clientName ?? client?.clientId}?`, `
<p>Scopes: <span id="scopes">${esc(wanted.join(' '))}</span></p>
<form method="post" action="/interaction/${esc(uid)}/confirm">
  <input type="hidden" name="prompt" value="consent">
  <button type="submit">Allow</button>
</form>
<p><a href="/interaction/${esc(uid)}/abort">Deny</a></p>`);
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_ADMIN_BODY) throw new Error('form too large');
    chunks.push(chunk);
  }
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

// The sign-in and consent steps (oidc-provider leaves these to the deployment): a user of
// `users` signs in with their `password` if they have one, with any password otherwise.
async function interaction(req, res, uid, action) {
  const html = (status, body) => {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(body);
  };
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return html(400, page('Wrong interaction', ''));
  const { prompt, params } = details;
  if (req.method === 'GET' && !action) {
    if (prompt.name === 'login') return html(200, loginPage(uid, params));
    const client = await provider.Client.find(params.client_id);
    return html(200, consentPage(uid, client, prompt.details));
  }
  if (action === 'abort') {
    return provider.interactionFinished(req, res, {
      error: 'access_denied', error_description: 'End-User aborted interaction',
    }, { mergeWithLastSubmission: false });
  }
  if (req.method !== 'POST') return html(405, page('Method not allowed', ''));
  const form = await readForm(req);
  if (action === 'login' && prompt.name === 'login') {
    const user = users[form.login];
    if (!user || (user.password !== undefined && user.password !== form.password)) {
      return html(200, loginPage(uid, params, 'Unknown user or wrong password.'));
    }
    return provider.interactionFinished(req, res, { login: { accountId: form.login } },
      { mergeWithLastSubmission: false });
  }
  if (action === 'confirm' && prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    return provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } },
      { mergeWithLastSubmission: true });
  }
  return html(400, page('Unexpected step', `<p>${esc(prompt.name)} / ${esc(action)}</p>`));
}

function buildProvider(issuer) {
  const ttl = (n, fallback) => (typeof n === 'number' && n > 0 ? n : fallback);
  const provider = new Provider(issuer, {
    adapter: adapterFor,
    clients: [...clients.values()].map(providerClient),
    jwks,
    // Cookies ignore ports: these share 127.0.0.1 with the console under test, so they
    // carry names of their own.
    cookies: {
      keys: config.cookie_keys,
      names: { session: 'idp_session', interaction: 'idp_interaction', resume: 'idp_resume' },
    },
    claims: {
      acr: null, auth_time: null, iss: null, sid: null, // oidc-provider's defaults
      openid: ['sub', 'groups', 'tk_tenant'],
      profile: ['name'],
      email: ['email', 'email_verified'],
    },
    conformIdTokenClaims: false,
    // The resources' scopes too: a client's registered `scope` (RFC 7591, as MCP clients
    // send the protected resource's scopes_supported) may only name scopes listed here.
    scopes: [...new Set(['openid', 'offline_access', 'profile', 'email',
      ...Object.values(resources).flatMap((r) => (r.scope ?? '').split(' ').filter(Boolean))])],
    findAccount: async (ctx, sub) => {
      const claims = userClaims(sub);
      if (!claims) return undefined;
      return { accountId: sub, claims: async () => claims };
    },
    extraTokenClaims,
    loadExistingGrant,
    pkce: { required: () => true },
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    ttl: {
      AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL
        ?? ttl(config.access_token_ttl_s, 300),
      ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL
        ?? ttl(config.access_token_ttl_s, 300),
      IdToken: () => ttl(config.id_token_ttl_s, 3600),
      RefreshToken: () => ttl(config.refresh_token_ttl_s, 86400),
      AuthorizationCode: () => 60,
      Interaction: () => 3600,
      Session: () => 86400,
      Grant: () => 86400,
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = page('Sign-in error', Object.entries(out)
        .map(([k, v]) => `<p><strong>${esc(k)}</strong>: <span class="${esc(k)}">${esc(v)}</span></p>`)
        .join(''));
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true, allowedPolicy: async () => true },
      revocation: { enabled: true },
      // open dynamic client registration (RFC 7591), as MCP clients use it
      registration: { enabled: true },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (ctx, form) => {
          ctx.body = page('Sign out of the test IdP?', `${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes">Sign out</button>
<button type="submit" form="op.logoutForm">Stay signed in</button>`);
        },
        postLogoutSuccessSource: async (ctx) => {
          ctx.body = page('Signed out', '<p id="signed-out">You are signed out.</p>');
        },
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (ctx, client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo,
      },
    },
  });
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    tokenExchange,
    ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type',
      'requested_token_type', 'resource', 'audience', 'scope'],
  );
  const find = provider.Client.find.bind(provider.Client);
  provider.Client.find = async (id, ...rest) => (disabled.has(id) ? undefined : find(id, ...rest));
  provider.on('server_error', (ctx, err) => console.error('server_error', err));
  for (const event of ['grant.error', 'introspection.error', 'revocation.error']) {
    provider.on(event, (ctx, err) => console.error(event, err.error, err.error_detail ?? ''));
  }
  return provider;
}

async function revokeGrants({ client_id: clientId, sub }) {
  if (!clientId && !sub) throw new Error('client_id or sub is required');
  let revoked = 0;
  for (const [id, grant] of [...grantIndex.entries()]) {
    if ((clientId && grant.clientId !== clientId) || (sub && grant.accountId !== sub)) continue;
    await adapterFor('AccessToken').revokeByGrantId(id); // every token kind under the grant
    await adapterFor('Grant').destroy(id);
    revoked += 1;
  }
  return { revoked };
}

async function revokeToken(provider, { token }) {
  let revoked = 0;
  for (const model of [provider.AccessToken, provider.ClientCredentials, provider.RefreshToken]) {
    const found = await model.find(token, { ignoreExpiration: true });
    if (found) {
      await found.destroy();
      revoked += 1;
    }
  }
  return { revoked };
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks = [];
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_ADMIN_BODY) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      try {
        resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {});
      } catch (err) {
        reject(err);
      }
    });
    req.on('error', reject);
  });
}

function secretMatches(given) {
  const a = Buffer.from(String(given ?? ''));
  const b = Buffer.from(config.admin_secret);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

let provider;
let handler;

async function admin(req, res) {
  const send = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (!secretMatches(req.headers['x-admin-secret'])) return send(401, { error: 'admin secret' });
  const path = new URL(req.url, 'http://x').pathname;
  try {
    if (req.method === 'GET' && path === '/admin/health') return send(200, { ok: true });
    if (req.method !== 'POST') return send(405, { error: 'method' });
    const body = await readJson(req);
    switch (path) {
      case '/admin/keys':
        jwks = body.jwks;
        install(buildProvider(provider.issuer));
        return send(200, { kids: jwks.keys.map((k) => k.kid) });
      case '/admin/clients':
        clients.set(body.client_id, body);
        disabled.delete(body.client_id);
        install(buildProvider(provider.issuer));
        return send(200, { client_id: body.client_id });
      case '/admin/users':
        Object.assign(users, body);
        return send(200, { users: Object.keys(body) });
      case '/admin/resources':
        Object.assign(resources, body);
        install(buildProvider(provider.issuer));
        return send(200, { resources: Object.keys(body) });
      case '/admin/clients/disable':
        disabled.add(body.client_id);
        return send(200, { disabled: body.client_id });
      case '/admin/clients/enable':
        disabled.delete(body.client_id);
        return send(200, { enabled: body.client_id });
      case '/admin/grants/revoke':
        return send(200, await revokeGrants(body));
      case '/admin/tokens/revoke':
        return send(200, await revokeToken(provider, body));
      default:
        return send(404, { error: 'no such admin route' });
    }
  } catch (err) {
    console.error('admin error', err);
    return send(400, { error: String(err.message ?? err) });
  }
}

function install(next) {
  provider = next;
  handler = next.callback();
}

const INTERACTION = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login|confirm|abort))?$/;
const server = http.createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  if (path.startsWith('/admin/')) {
    admin(req, res);
    return;
  }
  const step = INTERACTION.exec(path);
  if (step) {
    interaction(req, res, step[1], step[2]).catch((err) => {
      console.error('interaction error', err.name, err.message);
      if (!res.headersSent) {
        res.writeHead(400, { 'content-type': 'text/html; charset=utf-8' });
        res.end(page('Sign-in error', `<p class="error">${esc(err.message)}</p>`));
      }
    });
    return;
  }
  handler(req, res);
});
server.listen(config.port ?? 0, config.host ?? '127.0.0.1', () => {
  const { port } = server.address();
  install(buildProvider(`http://${config.host ?? '127.0.0.1'}:${port}`));
  fs.writeFileSync(`${config.ready_file}.tmp`, JSON.stringify({ port }));
  fs.renameSync(`${config.ready_file}.tmp`, config.ready_file);
  console.error(`idp listening on ${port}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => process.exit(0));
}
