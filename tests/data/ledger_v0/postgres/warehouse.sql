--
-- PostgreSQL database dump
--

\restrict NpyxCgqhnOjHlBKhcBWlShaddiN3NbyHgEDTVH6EIVoMojgPXahTfjl72PUR0Ge

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
-- Name: _sluice_commits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public._sluice_commits (
    batch_id character varying(255) NOT NULL,
    token bigint NOT NULL,
    rows bigint NOT NULL,
    committed_at timestamp with time zone NOT NULL
);


--
-- Name: _sluice_rejects; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public._sluice_rejects (
    id bigint NOT NULL,
    batch_id character varying(255) NOT NULL,
    source character varying(255) NOT NULL,
    key text NOT NULL,
    "row" text NOT NULL,
    reason text NOT NULL,
    rejected_at timestamp with time zone NOT NULL
);


--
-- Name: _sluice_rejects_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public._sluice_rejects_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: _sluice_rejects_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public._sluice_rejects_id_seq OWNED BY public._sluice_rejects.id;


--
-- Name: _sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 (
    id integer,
    customer text,
    amount numeric(12,2),
    flag smallint,
    placed_at timestamp without time zone,
    _sluice_row bigint NOT NULL
);


--
-- Name: customers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.customers (
    id integer NOT NULL,
    customer text,
    amount numeric(12,2),
    flag smallint,
    placed_at timestamp without time zone
);


--
-- Name: customers_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.customers_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: customers_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.customers_id_seq OWNED BY public.customers.id;


--
-- Name: orders; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.orders (
    id integer NOT NULL,
    customer text,
    amount numeric(12,2),
    flag smallint,
    placed_at timestamp without time zone
);


--
-- Name: orders_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.orders_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: orders_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.orders_id_seq OWNED BY public.orders.id;


--
-- Name: _sluice_rejects id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public._sluice_rejects ALTER COLUMN id SET DEFAULT nextval('public._sluice_rejects_id_seq'::regclass);


--
-- Name: customers id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customers ALTER COLUMN id SET DEFAULT nextval('public.customers_id_seq'::regclass);


--
-- Name: orders id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.orders ALTER COLUMN id SET DEFAULT nextval('public.orders_id_seq'::regclass);


--
-- Data for Name: _sluice_commits; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public._sluice_commits VALUES ('e3c75c10ba8b4154b69e821f8c9d0153', 1, 30, '2026-11-24 23:47:44.747738+00');
INSERT INTO public._sluice_commits VALUES ('eaba177630b84086b97fc851bb151298', 1, 30, '2026-11-24 23:47:46.855869+00');
INSERT INTO public._sluice_commits VALUES ('b0130c315ed2479694899dbf1a135d49', 1, 30, '2026-11-24 23:47:47.157025+00');
INSERT INTO public._sluice_commits VALUES ('834a8438c8054abca417f4d6a05d7ef4', 1, 30, '2026-11-24 23:47:47.604611+00');
INSERT INTO public._sluice_commits VALUES ('7a127a045a27468481b9aedb96219c61', 1, 30, '2026-11-24 23:47:47.797526+00');
INSERT INTO public._sluice_commits VALUES ('48f2a4d4169241ffbd67872e353df75b', 1, 30, '2026-11-24 23:47:48.203321+00');


--
-- Data for Name: _sluice_rejects; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: _sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (183, 'cust-61 ''quoted'' ü', 15.25, 1, '2024-03-01 12:37:37', 0);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (186, 'cust-62 ''quoted'' ü', 15.50, 0, '2024-03-01 12:38:14', 1);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (189, 'cust-63 ''quoted'' ü', 15.75, 1, '2024-03-01 12:38:51', 2);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (192, 'cust-64 ''quoted'' ü', 16.00, 0, '2024-03-01 12:39:28', 3);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (195, 'cust-65 ''quoted'' ü', 16.25, 1, '2024-03-01 12:40:05', 4);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (198, 'cust-66 ''quoted'' ü', 16.50, 0, '2024-03-01 12:40:42', 5);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (201, 'cust-67 ''quoted'' ü', 16.75, 1, '2024-03-01 12:41:19', 6);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (204, NULL, 17.00, 0, '2024-03-01 12:41:56', 7);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (207, 'cust-69 ''quoted'' ü', 17.25, 1, NULL, 8);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (210, 'cust-70 ''quoted'' ü', 17.50, 0, '2024-03-01 12:43:10', 9);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (213, 'cust-71 ''quoted'' ü', 17.75, 1, '2024-03-01 12:43:47', 10);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (216, 'cust-72 ''quoted'' ü', 18.00, 0, '2024-03-01 12:44:24', 11);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (219, 'cust-73 ''quoted'' ü', 18.25, 1, '2024-03-01 12:45:01', 12);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (222, 'cust-74 ''quoted'' ü', 18.50, 0, '2024-03-01 12:45:38', 13);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (225, 'cust-75 ''quoted'' ü', 18.75, 1, '2024-03-01 12:46:15', 14);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (228, 'cust-76 ''quoted'' ü', 19.00, 0, '2024-03-01 12:46:52', 15);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (231, 'cust-77 ''quoted'' ü', 19.25, 1, '2024-03-01 12:47:29', 16);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (234, 'cust-78 ''quoted'' ü', 19.50, 0, '2024-03-01 12:48:06', 17);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (237, 'cust-79 ''quoted'' ü', 19.75, 1, '2024-03-01 12:48:43', 18);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (240, 'cust-80 ''quoted'' ü', 20.00, 0, '2024-03-01 12:49:20', 19);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (243, 'cust-81 ''quoted'' ü', 20.25, 1, '2024-03-01 12:49:57', 20);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (246, 'cust-82 ''quoted'' ü', 20.50, 0, '2024-03-01 12:50:34', 21);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (249, 'cust-83 ''quoted'' ü', 20.75, 1, '2024-03-01 12:51:11', 22);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (252, 'cust-84 ''quoted'' ü', 21.00, 0, '2024-03-01 12:51:48', 23);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (255, NULL, 21.25, 1, '2024-03-01 12:52:25', 24);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (258, 'cust-86 ''quoted'' ü', 21.50, 0, '2024-03-01 12:53:02', 25);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (261, 'cust-87 ''quoted'' ü', 21.75, 1, '2024-03-01 12:53:39', 26);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (264, 'cust-88 ''quoted'' ü', 22.00, 0, '2024-03-01 12:54:16', 27);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (267, 'cust-89 ''quoted'' ü', 22.25, 1, '2024-03-01 12:54:53', 28);
INSERT INTO public._sluice_stage_48f2a4d4169241ff_89ea0c2e_1_575318 VALUES (270, 'cust-90 ''quoted'' ü', 22.50, 0, '2024-03-01 12:55:30', 29);


--
-- Data for Name: customers; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.customers VALUES (3, 'cust-1 ''quoted'' ü', 0.25, 1, '2024-03-01 12:00:37');
INSERT INTO public.customers VALUES (6, 'cust-2 ''quoted'' ü', 0.50, 0, '2024-03-01 12:01:14');
INSERT INTO public.customers VALUES (9, 'cust-3 ''quoted'' ü', 0.75, 1, '2024-03-01 12:01:51');
INSERT INTO public.customers VALUES (12, 'cust-4 ''quoted'' ü', 1.00, 0, '2024-03-01 12:02:28');
INSERT INTO public.customers VALUES (15, 'cust-5 ''quoted'' ü', 1.25, 1, '2024-03-01 12:03:05');
INSERT INTO public.customers VALUES (18, 'cust-6 ''quoted'' ü', 1.50, 0, '2024-03-01 12:03:42');
INSERT INTO public.customers VALUES (21, 'cust-7 ''quoted'' ü', 1.75, 1, '2024-03-01 12:04:19');
INSERT INTO public.customers VALUES (24, 'cust-8 ''quoted'' ü', 2.00, 0, '2024-03-01 12:04:56');
INSERT INTO public.customers VALUES (27, 'cust-9 ''quoted'' ü', 2.25, 1, '2024-03-01 12:05:33');
INSERT INTO public.customers VALUES (30, 'cust-10 ''quoted'' ü', 2.50, 0, '2024-03-01 12:06:10');
INSERT INTO public.customers VALUES (33, 'cust-11 ''quoted'' ü', 2.75, 1, '2024-03-01 12:06:47');
INSERT INTO public.customers VALUES (36, 'cust-12 ''quoted'' ü', 3.00, 0, '2024-03-01 12:07:24');
INSERT INTO public.customers VALUES (39, 'cust-13 ''quoted'' ü', 3.25, 1, '2024-03-01 12:08:01');
INSERT INTO public.customers VALUES (42, 'cust-14 ''quoted'' ü', 3.50, 0, '2024-03-01 12:08:38');
INSERT INTO public.customers VALUES (45, 'cust-15 ''quoted'' ü', 3.75, 1, '2024-03-01 12:09:15');
INSERT INTO public.customers VALUES (48, 'cust-16 ''quoted'' ü', 4.00, 0, '2024-03-01 12:09:52');
INSERT INTO public.customers VALUES (51, NULL, 4.25, 1, '2024-03-01 12:10:29');
INSERT INTO public.customers VALUES (54, 'cust-18 ''quoted'' ü', 4.50, 0, '2024-03-01 12:11:06');
INSERT INTO public.customers VALUES (57, 'cust-19 ''quoted'' ü', 4.75, 1, '2024-03-01 12:11:43');
INSERT INTO public.customers VALUES (60, 'cust-20 ''quoted'' ü', 5.00, 0, '2024-03-01 12:12:20');
INSERT INTO public.customers VALUES (63, 'cust-21 ''quoted'' ü', 5.25, 1, '2024-03-01 12:12:57');
INSERT INTO public.customers VALUES (66, 'cust-22 ''quoted'' ü', 5.50, 0, '2024-03-01 12:13:34');
INSERT INTO public.customers VALUES (69, 'cust-23 ''quoted'' ü', 5.75, 1, NULL);
INSERT INTO public.customers VALUES (72, 'cust-24 ''quoted'' ü', 6.00, 0, '2024-03-01 12:14:48');
INSERT INTO public.customers VALUES (75, 'cust-25 ''quoted'' ü', 6.25, 1, '2024-03-01 12:15:25');
INSERT INTO public.customers VALUES (78, 'cust-26 ''quoted'' ü', 6.50, 0, '2024-03-01 12:16:02');
INSERT INTO public.customers VALUES (81, 'cust-27 ''quoted'' ü', 6.75, 1, '2024-03-01 12:16:39');
INSERT INTO public.customers VALUES (84, 'cust-28 ''quoted'' ü', 7.00, 0, '2024-03-01 12:17:16');
INSERT INTO public.customers VALUES (87, 'cust-29 ''quoted'' ü', 7.25, 1, '2024-03-01 12:17:53');
INSERT INTO public.customers VALUES (90, 'cust-30 ''quoted'' ü', 7.50, 0, '2024-03-01 12:18:30');
INSERT INTO public.customers VALUES (93, 'cust-31 ''quoted'' ü', 7.75, 1, '2024-03-01 12:19:07');
INSERT INTO public.customers VALUES (96, 'cust-32 ''quoted'' ü', 8.00, 0, '2024-03-01 12:19:44');
INSERT INTO public.customers VALUES (99, 'cust-33 ''quoted'' ü', 8.25, 1, '2024-03-01 12:20:21');
INSERT INTO public.customers VALUES (102, NULL, 8.50, 0, '2024-03-01 12:20:58');
INSERT INTO public.customers VALUES (105, 'cust-35 ''quoted'' ü', 8.75, 1, '2024-03-01 12:21:35');
INSERT INTO public.customers VALUES (108, 'cust-36 ''quoted'' ü', 9.00, 0, '2024-03-01 12:22:12');
INSERT INTO public.customers VALUES (111, 'cust-37 ''quoted'' ü', 9.25, 1, '2024-03-01 12:22:49');
INSERT INTO public.customers VALUES (114, 'cust-38 ''quoted'' ü', 9.50, 0, '2024-03-01 12:23:26');
INSERT INTO public.customers VALUES (117, 'cust-39 ''quoted'' ü', 9.75, 1, '2024-03-01 12:24:03');
INSERT INTO public.customers VALUES (120, 'cust-40 ''quoted'' ü', 10.00, 0, '2024-03-01 12:24:40');
INSERT INTO public.customers VALUES (123, 'cust-41 ''quoted'' ü', 10.25, 1, '2024-03-01 12:25:17');
INSERT INTO public.customers VALUES (126, 'cust-42 ''quoted'' ü', 10.50, 0, '2024-03-01 12:25:54');
INSERT INTO public.customers VALUES (129, 'cust-43 ''quoted'' ü', 10.75, 1, '2024-03-01 12:26:31');
INSERT INTO public.customers VALUES (132, 'cust-44 ''quoted'' ü', 11.00, 0, '2024-03-01 12:27:08');
INSERT INTO public.customers VALUES (135, 'cust-45 ''quoted'' ü', 11.25, 1, '2024-03-01 12:27:45');
INSERT INTO public.customers VALUES (138, 'cust-46 ''quoted'' ü', 11.50, 0, NULL);
INSERT INTO public.customers VALUES (141, 'cust-47 ''quoted'' ü', 11.75, 1, '2024-03-01 12:28:59');
INSERT INTO public.customers VALUES (144, 'cust-48 ''quoted'' ü', 12.00, 0, '2024-03-01 12:29:36');
INSERT INTO public.customers VALUES (147, 'cust-49 ''quoted'' ü', 12.25, 1, '2024-03-01 12:30:13');
INSERT INTO public.customers VALUES (150, 'cust-50 ''quoted'' ü', 12.50, 0, '2024-03-01 12:30:50');
INSERT INTO public.customers VALUES (153, NULL, 12.75, 1, '2024-03-01 12:31:27');
INSERT INTO public.customers VALUES (156, 'cust-52 ''quoted'' ü', 13.00, 0, '2024-03-01 12:32:04');
INSERT INTO public.customers VALUES (159, 'cust-53 ''quoted'' ü', 13.25, 1, '2024-03-01 12:32:41');
INSERT INTO public.customers VALUES (162, 'cust-54 ''quoted'' ü', 13.50, 0, '2024-03-01 12:33:18');
INSERT INTO public.customers VALUES (165, 'cust-55 ''quoted'' ü', 13.75, 1, '2024-03-01 12:33:55');
INSERT INTO public.customers VALUES (168, 'cust-56 ''quoted'' ü', 14.00, 0, '2024-03-01 12:34:32');
INSERT INTO public.customers VALUES (171, 'cust-57 ''quoted'' ü', 14.25, 1, '2024-03-01 12:35:09');
INSERT INTO public.customers VALUES (174, 'cust-58 ''quoted'' ü', 14.50, 0, '2024-03-01 12:35:46');
INSERT INTO public.customers VALUES (177, 'cust-59 ''quoted'' ü', 14.75, 1, '2024-03-01 12:36:23');
INSERT INTO public.customers VALUES (180, 'cust-60 ''quoted'' ü', 15.00, 0, '2024-03-01 12:37:00');
INSERT INTO public.customers VALUES (183, 'cust-61 ''quoted'' ü', 15.25, 1, '2024-03-01 12:37:37');
INSERT INTO public.customers VALUES (186, 'cust-62 ''quoted'' ü', 15.50, 0, '2024-03-01 12:38:14');
INSERT INTO public.customers VALUES (189, 'cust-63 ''quoted'' ü', 15.75, 1, '2024-03-01 12:38:51');
INSERT INTO public.customers VALUES (192, 'cust-64 ''quoted'' ü', 16.00, 0, '2024-03-01 12:39:28');
INSERT INTO public.customers VALUES (195, 'cust-65 ''quoted'' ü', 16.25, 1, '2024-03-01 12:40:05');
INSERT INTO public.customers VALUES (198, 'cust-66 ''quoted'' ü', 16.50, 0, '2024-03-01 12:40:42');
INSERT INTO public.customers VALUES (201, 'cust-67 ''quoted'' ü', 16.75, 1, '2024-03-01 12:41:19');
INSERT INTO public.customers VALUES (204, NULL, 17.00, 0, '2024-03-01 12:41:56');
INSERT INTO public.customers VALUES (207, 'cust-69 ''quoted'' ü', 17.25, 1, NULL);
INSERT INTO public.customers VALUES (210, 'cust-70 ''quoted'' ü', 17.50, 0, '2024-03-01 12:43:10');
INSERT INTO public.customers VALUES (213, 'cust-71 ''quoted'' ü', 17.75, 1, '2024-03-01 12:43:47');
INSERT INTO public.customers VALUES (216, 'cust-72 ''quoted'' ü', 18.00, 0, '2024-03-01 12:44:24');
INSERT INTO public.customers VALUES (219, 'cust-73 ''quoted'' ü', 18.25, 1, '2024-03-01 12:45:01');
INSERT INTO public.customers VALUES (222, 'cust-74 ''quoted'' ü', 18.50, 0, '2024-03-01 12:45:38');
INSERT INTO public.customers VALUES (225, 'cust-75 ''quoted'' ü', 18.75, 1, '2024-03-01 12:46:15');
INSERT INTO public.customers VALUES (228, 'cust-76 ''quoted'' ü', 19.00, 0, '2024-03-01 12:46:52');
INSERT INTO public.customers VALUES (231, 'cust-77 ''quoted'' ü', 19.25, 1, '2024-03-01 12:47:29');
INSERT INTO public.customers VALUES (234, 'cust-78 ''quoted'' ü', 19.50, 0, '2024-03-01 12:48:06');
INSERT INTO public.customers VALUES (237, 'cust-79 ''quoted'' ü', 19.75, 1, '2024-03-01 12:48:43');
INSERT INTO public.customers VALUES (240, 'cust-80 ''quoted'' ü', 20.00, 0, '2024-03-01 12:49:20');
INSERT INTO public.customers VALUES (243, 'cust-81 ''quoted'' ü', 20.25, 1, '2024-03-01 12:49:57');
INSERT INTO public.customers VALUES (246, 'cust-82 ''quoted'' ü', 20.50, 0, '2024-03-01 12:50:34');
INSERT INTO public.customers VALUES (249, 'cust-83 ''quoted'' ü', 20.75, 1, '2024-03-01 12:51:11');
INSERT INTO public.customers VALUES (252, 'cust-84 ''quoted'' ü', 21.00, 0, '2024-03-01 12:51:48');
INSERT INTO public.customers VALUES (255, NULL, 21.25, 1, '2024-03-01 12:52:25');
INSERT INTO public.customers VALUES (258, 'cust-86 ''quoted'' ü', 21.50, 0, '2024-03-01 12:53:02');
INSERT INTO public.customers VALUES (261, 'cust-87 ''quoted'' ü', 21.75, 1, '2024-03-01 12:53:39');
INSERT INTO public.customers VALUES (264, 'cust-88 ''quoted'' ü', 22.00, 0, '2024-03-01 12:54:16');
INSERT INTO public.customers VALUES (267, 'cust-89 ''quoted'' ü', 22.25, 1, '2024-03-01 12:54:53');
INSERT INTO public.customers VALUES (270, 'cust-90 ''quoted'' ü', 22.50, 0, '2024-03-01 12:55:30');


--
-- Data for Name: orders; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.orders VALUES (3, 'cust-1 ''quoted'' ü', 0.25, 1, '2024-03-01 12:00:37');
INSERT INTO public.orders VALUES (6, 'cust-2 ''quoted'' ü', 0.50, 0, '2024-03-01 12:01:14');
INSERT INTO public.orders VALUES (9, 'cust-3 ''quoted'' ü', 0.75, 1, '2024-03-01 12:01:51');
INSERT INTO public.orders VALUES (12, 'cust-4 ''quoted'' ü', 1.00, 0, '2024-03-01 12:02:28');
INSERT INTO public.orders VALUES (15, 'cust-5 ''quoted'' ü', 1.25, 1, '2024-03-01 12:03:05');
INSERT INTO public.orders VALUES (18, 'cust-6 ''quoted'' ü', 1.50, 0, '2024-03-01 12:03:42');
INSERT INTO public.orders VALUES (21, 'cust-7 ''quoted'' ü', 1.75, 1, '2024-03-01 12:04:19');
INSERT INTO public.orders VALUES (24, 'cust-8 ''quoted'' ü', 2.00, 0, '2024-03-01 12:04:56');
INSERT INTO public.orders VALUES (27, 'cust-9 ''quoted'' ü', 2.25, 1, '2024-03-01 12:05:33');
INSERT INTO public.orders VALUES (30, 'cust-10 ''quoted'' ü', 2.50, 0, '2024-03-01 12:06:10');
INSERT INTO public.orders VALUES (33, 'cust-11 ''quoted'' ü', 2.75, 1, '2024-03-01 12:06:47');
INSERT INTO public.orders VALUES (36, 'cust-12 ''quoted'' ü', 3.00, 0, '2024-03-01 12:07:24');
INSERT INTO public.orders VALUES (39, 'cust-13 ''quoted'' ü', 3.25, 1, '2024-03-01 12:08:01');
INSERT INTO public.orders VALUES (42, 'cust-14 ''quoted'' ü', 3.50, 0, '2024-03-01 12:08:38');
INSERT INTO public.orders VALUES (45, 'cust-15 ''quoted'' ü', 3.75, 1, '2024-03-01 12:09:15');
INSERT INTO public.orders VALUES (48, 'cust-16 ''quoted'' ü', 4.00, 0, '2024-03-01 12:09:52');
INSERT INTO public.orders VALUES (51, NULL, 4.25, 1, '2024-03-01 12:10:29');
INSERT INTO public.orders VALUES (54, 'cust-18 ''quoted'' ü', 4.50, 0, '2024-03-01 12:11:06');
INSERT INTO public.orders VALUES (57, 'cust-19 ''quoted'' ü', 4.75, 1, '2024-03-01 12:11:43');
INSERT INTO public.orders VALUES (60, 'cust-20 ''quoted'' ü', 5.00, 0, '2024-03-01 12:12:20');
INSERT INTO public.orders VALUES (63, 'cust-21 ''quoted'' ü', 5.25, 1, '2024-03-01 12:12:57');
INSERT INTO public.orders VALUES (66, 'cust-22 ''quoted'' ü', 5.50, 0, '2024-03-01 12:13:34');
INSERT INTO public.orders VALUES (69, 'cust-23 ''quoted'' ü', 5.75, 1, NULL);
INSERT INTO public.orders VALUES (72, 'cust-24 ''quoted'' ü', 6.00, 0, '2024-03-01 12:14:48');
INSERT INTO public.orders VALUES (75, 'cust-25 ''quoted'' ü', 6.25, 1, '2024-03-01 12:15:25');
INSERT INTO public.orders VALUES (78, 'cust-26 ''quoted'' ü', 6.50, 0, '2024-03-01 12:16:02');
INSERT INTO public.orders VALUES (81, 'cust-27 ''quoted'' ü', 6.75, 1, '2024-03-01 12:16:39');
INSERT INTO public.orders VALUES (84, 'cust-28 ''quoted'' ü', 7.00, 0, '2024-03-01 12:17:16');
INSERT INTO public.orders VALUES (87, 'cust-29 ''quoted'' ü', 7.25, 1, '2024-03-01 12:17:53');
INSERT INTO public.orders VALUES (90, 'cust-30 ''quoted'' ü', 7.50, 0, '2024-03-01 12:18:30');
INSERT INTO public.orders VALUES (93, 'cust-31 ''quoted'' ü', 7.75, 1, '2024-03-01 12:19:07');
INSERT INTO public.orders VALUES (96, 'cust-32 ''quoted'' ü', 8.00, 0, '2024-03-01 12:19:44');
INSERT INTO public.orders VALUES (99, 'cust-33 ''quoted'' ü', 8.25, 1, '2024-03-01 12:20:21');
INSERT INTO public.orders VALUES (102, NULL, 8.50, 0, '2024-03-01 12:20:58');
INSERT INTO public.orders VALUES (105, 'cust-35 ''quoted'' ü', 8.75, 1, '2024-03-01 12:21:35');
INSERT INTO public.orders VALUES (108, 'cust-36 ''quoted'' ü', 9.00, 0, '2024-03-01 12:22:12');
INSERT INTO public.orders VALUES (111, 'cust-37 ''quoted'' ü', 9.25, 1, '2024-03-01 12:22:49');
INSERT INTO public.orders VALUES (114, 'cust-38 ''quoted'' ü', 9.50, 0, '2024-03-01 12:23:26');
INSERT INTO public.orders VALUES (117, 'cust-39 ''quoted'' ü', 9.75, 1, '2024-03-01 12:24:03');
INSERT INTO public.orders VALUES (120, 'cust-40 ''quoted'' ü', 10.00, 0, '2024-03-01 12:24:40');
INSERT INTO public.orders VALUES (123, 'cust-41 ''quoted'' ü', 10.25, 1, '2024-03-01 12:25:17');
INSERT INTO public.orders VALUES (126, 'cust-42 ''quoted'' ü', 10.50, 0, '2024-03-01 12:25:54');
INSERT INTO public.orders VALUES (129, 'cust-43 ''quoted'' ü', 10.75, 1, '2024-03-01 12:26:31');
INSERT INTO public.orders VALUES (132, 'cust-44 ''quoted'' ü', 11.00, 0, '2024-03-01 12:27:08');
INSERT INTO public.orders VALUES (135, 'cust-45 ''quoted'' ü', 11.25, 1, '2024-03-01 12:27:45');
INSERT INTO public.orders VALUES (138, 'cust-46 ''quoted'' ü', 11.50, 0, NULL);
INSERT INTO public.orders VALUES (141, 'cust-47 ''quoted'' ü', 11.75, 1, '2024-03-01 12:28:59');
INSERT INTO public.orders VALUES (144, 'cust-48 ''quoted'' ü', 12.00, 0, '2024-03-01 12:29:36');
INSERT INTO public.orders VALUES (147, 'cust-49 ''quoted'' ü', 12.25, 1, '2024-03-01 12:30:13');
INSERT INTO public.orders VALUES (150, 'cust-50 ''quoted'' ü', 12.50, 0, '2024-03-01 12:30:50');
INSERT INTO public.orders VALUES (153, NULL, 12.75, 1, '2024-03-01 12:31:27');
INSERT INTO public.orders VALUES (156, 'cust-52 ''quoted'' ü', 13.00, 0, '2024-03-01 12:32:04');
INSERT INTO public.orders VALUES (159, 'cust-53 ''quoted'' ü', 13.25, 1, '2024-03-01 12:32:41');
INSERT INTO public.orders VALUES (162, 'cust-54 ''quoted'' ü', 13.50, 0, '2024-03-01 12:33:18');
INSERT INTO public.orders VALUES (165, 'cust-55 ''quoted'' ü', 13.75, 1, '2024-03-01 12:33:55');
INSERT INTO public.orders VALUES (168, 'cust-56 ''quoted'' ü', 14.00, 0, '2024-03-01 12:34:32');
INSERT INTO public.orders VALUES (171, 'cust-57 ''quoted'' ü', 14.25, 1, '2024-03-01 12:35:09');
INSERT INTO public.orders VALUES (174, 'cust-58 ''quoted'' ü', 14.50, 0, '2024-03-01 12:35:46');
INSERT INTO public.orders VALUES (177, 'cust-59 ''quoted'' ü', 14.75, 1, '2024-03-01 12:36:23');
INSERT INTO public.orders VALUES (180, 'cust-60 ''quoted'' ü', 15.00, 0, '2024-03-01 12:37:00');
INSERT INTO public.orders VALUES (183, 'cust-61 ''quoted'' ü', 15.25, 1, '2024-03-01 12:37:37');
INSERT INTO public.orders VALUES (186, 'cust-62 ''quoted'' ü', 15.50, 0, '2024-03-01 12:38:14');
INSERT INTO public.orders VALUES (189, 'cust-63 ''quoted'' ü', 15.75, 1, '2024-03-01 12:38:51');
INSERT INTO public.orders VALUES (192, 'cust-64 ''quoted'' ü', 16.00, 0, '2024-03-01 12:39:28');
INSERT INTO public.orders VALUES (195, 'cust-65 ''quoted'' ü', 16.25, 1, '2024-03-01 12:40:05');
INSERT INTO public.orders VALUES (198, 'cust-66 ''quoted'' ü', 16.50, 0, '2024-03-01 12:40:42');
INSERT INTO public.orders VALUES (201, 'cust-67 ''quoted'' ü', 16.75, 1, '2024-03-01 12:41:19');
INSERT INTO public.orders VALUES (204, NULL, 17.00, 0, '2024-03-01 12:41:56');
INSERT INTO public.orders VALUES (207, 'cust-69 ''quoted'' ü', 17.25, 1, NULL);
INSERT INTO public.orders VALUES (210, 'cust-70 ''quoted'' ü', 17.50, 0, '2024-03-01 12:43:10');
INSERT INTO public.orders VALUES (213, 'cust-71 ''quoted'' ü', 17.75, 1, '2024-03-01 12:43:47');
INSERT INTO public.orders VALUES (216, 'cust-72 ''quoted'' ü', 18.00, 0, '2024-03-01 12:44:24');
INSERT INTO public.orders VALUES (219, 'cust-73 ''quoted'' ü', 18.25, 1, '2024-03-01 12:45:01');
INSERT INTO public.orders VALUES (222, 'cust-74 ''quoted'' ü', 18.50, 0, '2024-03-01 12:45:38');
INSERT INTO public.orders VALUES (225, 'cust-75 ''quoted'' ü', 18.75, 1, '2024-03-01 12:46:15');
INSERT INTO public.orders VALUES (228, 'cust-76 ''quoted'' ü', 19.00, 0, '2024-03-01 12:46:52');
INSERT INTO public.orders VALUES (231, 'cust-77 ''quoted'' ü', 19.25, 1, '2024-03-01 12:47:29');
INSERT INTO public.orders VALUES (234, 'cust-78 ''quoted'' ü', 19.50, 0, '2024-03-01 12:48:06');
INSERT INTO public.orders VALUES (237, 'cust-79 ''quoted'' ü', 19.75, 1, '2024-03-01 12:48:43');
INSERT INTO public.orders VALUES (240, 'cust-80 ''quoted'' ü', 20.00, 0, '2024-03-01 12:49:20');
INSERT INTO public.orders VALUES (243, 'cust-81 ''quoted'' ü', 20.25, 1, '2024-03-01 12:49:57');
INSERT INTO public.orders VALUES (246, 'cust-82 ''quoted'' ü', 20.50, 0, '2024-03-01 12:50:34');
INSERT INTO public.orders VALUES (249, 'cust-83 ''quoted'' ü', 20.75, 1, '2024-03-01 12:51:11');
INSERT INTO public.orders VALUES (252, 'cust-84 ''quoted'' ü', 21.00, 0, '2024-03-01 12:51:48');
INSERT INTO public.orders VALUES (255, NULL, 21.25, 1, '2024-03-01 12:52:25');
INSERT INTO public.orders VALUES (258, 'cust-86 ''quoted'' ü', 21.50, 0, '2024-03-01 12:53:02');
INSERT INTO public.orders VALUES (261, 'cust-87 ''quoted'' ü', 21.75, 1, '2024-03-01 12:53:39');
INSERT INTO public.orders VALUES (264, 'cust-88 ''quoted'' ü', 22.00, 0, '2024-03-01 12:54:16');
INSERT INTO public.orders VALUES (267, 'cust-89 ''quoted'' ü', 22.25, 1, '2024-03-01 12:54:53');
INSERT INTO public.orders VALUES (270, 'cust-90 ''quoted'' ü', 22.50, 0, '2024-03-01 12:55:30');


--
-- Name: _sluice_rejects_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public._sluice_rejects_id_seq', 1, false);


--
-- Name: customers_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.customers_id_seq', 1, false);


--
-- Name: orders_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.orders_id_seq', 1, false);


--
-- Name: _sluice_commits _sluice_commits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public._sluice_commits
    ADD CONSTRAINT _sluice_commits_pkey PRIMARY KEY (batch_id);


--
-- Name: _sluice_rejects _sluice_rejects_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public._sluice_rejects
    ADD CONSTRAINT _sluice_rejects_pkey PRIMARY KEY (id);


--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (id);


--
-- Name: orders orders_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (id);


--
-- Name: ix__sluice_rejects_batch_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix__sluice_rejects_batch_id ON public._sluice_rejects USING btree (batch_id);


--
-- PostgreSQL database dump complete
--

\unrestrict NpyxCgqhnOjHlBKhcBWlShaddiN3NbyHgEDTVH6EIVoMojgPXahTfjl72PUR0Ge

