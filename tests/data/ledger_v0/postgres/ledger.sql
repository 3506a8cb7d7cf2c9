--
-- PostgreSQL database dump
--

\restrict jt6QbXiufXfLabLAk1LFH8eCMlCsYvhfdGGL7qL7AebgU1hvQm8EkLjjmX8JyxZ

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: sluice_batches; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sluice_batches (
    id character varying(32) NOT NULL,
    source character varying(200) NOT NULL,
    target character varying(400) NOT NULL,
    kind character varying(16) NOT NULL,
    state character varying(16) NOT NULL,
    version integer NOT NULL,
    token integer NOT NULL,
    attempts integer NOT NULL,
    items integer NOT NULL,
    rows bigint,
    rejected bigint,
    manifest text NOT NULL,
    error text,
    not_before double precision,
    owner character varying(120),
    lease_until double precision,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);


--
-- Name: sluice_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sluice_keys (
    source character varying(200) NOT NULL,
    key character varying(1000) NOT NULL,
    version character varying(200) NOT NULL,
    batch_id character varying(32) NOT NULL
);


--
-- Name: sluice_owners; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sluice_owners (
    owner character varying(120) NOT NULL,
    host character varying(200) NOT NULL,
    pid integer NOT NULL,
    started_at double precision NOT NULL,
    heartbeat_at double precision NOT NULL
);


--
-- Name: sluice_poison; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sluice_poison (
    id integer NOT NULL,
    source character varying(200) NOT NULL,
    message_id character varying(200) NOT NULL,
    reason text NOT NULL,
    body text NOT NULL,
    recorded_at double precision NOT NULL
);


--
-- Name: sluice_poison_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.sluice_poison_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: sluice_poison_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.sluice_poison_id_seq OWNED BY public.sluice_poison.id;


--
-- Name: sluice_sources; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sluice_sources (
    name character varying(200) NOT NULL,
    fingerprint character varying(64) NOT NULL,
    high_water text,
    version integer NOT NULL,
    updated_at double precision NOT NULL
);


--
-- Name: sluice_poison id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sluice_poison ALTER COLUMN id SET DEFAULT nextval('public.sluice_poison_id_seq'::regclass);


--
-- Data for Name: sluice_batches; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sluice_batches VALUES ('e3c75c10ba8b4154b69e821f8c9d0153', 'customers', 'warehouse.customers', 'keys', 'done', 1, 1, 1, 30, 30, 0, '{"batch_id":"e3c75c10ba8b4154b69e821f8c9d0153","source":"customers","target":"warehouse.customers","kind":"keys","items":30,"token":1,"lo":null,"hi":null,"keys":[[3],[6],[9],[12],[15],[18],[21],[24],[27],[30],[33],[36],[39],[42],[45],[48],[51],[54],[57],[60],[63],[66],[69],[72],[75],[78],[81],[84],[87],[90]],"payloads":[]}', NULL, NULL, 'vm:5906:f538e2e3', NULL, 1795564055.798371, 1795564064.7624521);
INSERT INTO public.sluice_batches VALUES ('eaba177630b84086b97fc851bb151298', 'orders', 'warehouse.orders', 'range', 'done', 1, 1, 1, 30, 30, 0, '{"batch_id":"eaba177630b84086b97fc851bb151298","source":"orders","target":"warehouse.orders","kind":"range","items":30,"token":1,"lo":null,"hi":[90],"keys":[],"payloads":[]}', NULL, NULL, 'vm:5906:f538e2e3', NULL, 1795564064.7654161, 1795564066.9343596);
INSERT INTO public.sluice_batches VALUES ('b0130c315ed2479694899dbf1a135d49', 'orders', 'warehouse.orders', 'range', 'done', 1, 1, 1, 30, 30, 0, '{"batch_id":"b0130c315ed2479694899dbf1a135d49","source":"orders","target":"warehouse.orders","kind":"range","items":30,"token":1,"lo":[90],"hi":[180],"keys":[],"payloads":[]}', NULL, NULL, 'vm:5906:f538e2e3', NULL, 1795564066.9363103, 1795564067.1834757);
INSERT INTO public.sluice_batches VALUES ('834a8438c8054abca417f4d6a05d7ef4', 'customers', 'warehouse.customers', 'keys', 'done', 1, 1, 1, 30, 30, 0, '{"batch_id":"834a8438c8054abca417f4d6a05d7ef4","source":"customers","target":"warehouse.customers","kind":"keys","items":30,"token":1,"lo":null,"hi":null,"keys":[[93],[96],[99],[102],[105],[108],[111],[114],[117],[120],[123],[126],[129],[132],[135],[138],[141],[144],[147],[150],[153],[156],[159],[162],[165],[168],[171],[174],[177],[180]],"payloads":[]}', NULL, NULL, 'vm:5906:f538e2e3', NULL, 1795564067.187998, 1795564067.6090364);
INSERT INTO public.sluice_batches VALUES ('7a127a045a27468481b9aedb96219c61', 'orders', 'warehouse.orders', 'range', 'done', 1, 1, 1, 30, 30, 0, '{"batch_id":"7a127a045a27468481b9aedb96219c61","source":"orders","target":"warehouse.orders","kind":"range","items":30,"token":1,"lo":[180],"hi":[270],"keys":[],"payloads":[]}', NULL, NULL, 'vm:5906:f538e2e3', NULL, 1795564067.6118042, 1795564067.8149245);
INSERT INTO public.sluice_batches VALUES ('48f2a4d4169241ffbd67872e353df75b', 'customers', 'warehouse.customers', 'keys', 'importing', 0, 1, 1, 30, NULL, NULL, '{"batch_id":"48f2a4d4169241ffbd67872e353df75b","source":"customers","target":"warehouse.customers","kind":"keys","items":30,"token":1,"lo":null,"hi":null,"keys":[[183],[186],[189],[192],[195],[198],[201],[204],[207],[210],[213],[216],[219],[222],[225],[228],[231],[234],[237],[240],[243],[246],[249],[252],[255],[258],[261],[264],[267],[270]],"payloads":[]}', NULL, NULL, 'vm:5906:f538e2e3', 1795564667.820094, 1795564067.820094, 1795564067.820094);


--
-- Data for Name: sluice_keys; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sluice_keys VALUES ('customers', '[3]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[6]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[9]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[12]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[15]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[18]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[21]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[24]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[27]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[30]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[33]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[36]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[39]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[42]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[45]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[48]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[51]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[54]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[57]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[60]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[63]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[66]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[69]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[72]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[75]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[78]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[81]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[84]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[87]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[90]', '', 'e3c75c10ba8b4154b69e821f8c9d0153');
INSERT INTO public.sluice_keys VALUES ('customers', '[93]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[96]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[99]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[102]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[105]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[108]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[111]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[114]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[117]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[120]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[123]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[126]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[129]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[132]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[135]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[138]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[141]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[144]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[147]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[150]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[153]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[156]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[159]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[162]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[165]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[168]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[171]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[174]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[177]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[180]', '', '834a8438c8054abca417f4d6a05d7ef4');
INSERT INTO public.sluice_keys VALUES ('customers', '[183]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[186]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[189]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[192]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[195]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[198]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[201]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[204]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[207]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[210]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[213]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[216]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[219]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[222]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[225]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[228]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[231]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[234]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[237]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[240]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[243]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[246]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[249]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[252]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[255]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[258]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[261]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[264]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[267]', '', '48f2a4d4169241ffbd67872e353df75b');
INSERT INTO public.sluice_keys VALUES ('customers', '[270]', '', '48f2a4d4169241ffbd67872e353df75b');


--
-- Data for Name: sluice_owners; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sluice_owners VALUES ('vm:5906:f538e2e3', 'vm', 5906, 1795564055.6638436, 1795564065.769645);


--
-- Data for Name: sluice_poison; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: sluice_sources; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sluice_sources VALUES ('customers', '0e02c67ef446070c6c1b606e78e2a6924b536ea65986f07866d2e9d1ee845281', NULL, 0, 1795564055.687401);
INSERT INTO public.sluice_sources VALUES ('orders', '3e829ee6357321e67da8cc4c0119d40894283eaf480e0d29cb393a69e3c214fa', '[270]', 3, 1795564067.6108704);


--
-- Name: sluice_poison_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.sluice_poison_id_seq', 1, false);


--
-- Name: sluice_batches sluice_batches_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sluice_batches
    ADD CONSTRAINT sluice_batches_pkey PRIMARY KEY (id);


--
-- Name: sluice_keys sluice_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sluice_keys
    ADD CONSTRAINT sluice_keys_pkey PRIMARY KEY (source, key, version);


--
-- Name: sluice_owners sluice_owners_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sluice_owners
    ADD CONSTRAINT sluice_owners_pkey PRIMARY KEY (owner);


--
-- Name: sluice_poison sluice_poison_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sluice_poison
    ADD CONSTRAINT sluice_poison_pkey PRIMARY KEY (id);


--
-- Name: sluice_sources sluice_sources_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sluice_sources
    ADD CONSTRAINT sluice_sources_pkey PRIMARY KEY (name);


--
-- Name: ix_sluice_batches_owner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_sluice_batches_owner ON public.sluice_batches USING btree (owner);


--
-- Name: ix_sluice_batches_source; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_sluice_batches_source ON public.sluice_batches USING btree (source);


--
-- Name: ix_sluice_batches_state; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_sluice_batches_state ON public.sluice_batches USING btree (state);


--
-- Name: ix_sluice_keys_batch_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_sluice_keys_batch_id ON public.sluice_keys USING btree (batch_id);


--
-- Name: ix_sluice_poison_source; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_sluice_poison_source ON public.sluice_poison USING btree (source);


--
-- PostgreSQL database dump complete
--

\unrestrict jt6QbXiufXfLabLAk1LFH8eCMlCsYvhfdGGL7qL7AebgU1hvQm8EkLjjmX8JyxZ

